package binpages

import "errors"

// ErrUnsupported is returned (wrapped) where pages cannot be released: not
// Linux, or no /proc.
var ErrUnsupported = errors.New("releasing binary pages is not supported here")
