package wheel

import "errors"

// ErrConfig is wrapped by every error that rejects a Config or a constructor
// argument. The wrapping message names the offending field and the reason.
var ErrConfig = errors.New("wheel: invalid configuration")
