package writemark

import "errors"

// ErrClosed: the tracker was closed (the controller stops); no write may
// begin.
var ErrClosed = errors.New("write marks closed")
