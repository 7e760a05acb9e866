package execstore

import "errors"

// ErrCASConflict is returned by the store's writes when the record changed
// since it was read.
var ErrCASConflict = errors.New("execution changed concurrently")
