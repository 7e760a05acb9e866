package handler

import "errors"

// ErrConfig marks an invalid handler configuration.
var ErrConfig = errors.New("handler: invalid config")
