package streams

import "errors"

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("invalid streams config")
