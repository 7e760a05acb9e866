package binpages

import "errors"

// ErrUnsupported is returned (wrapped) where pages cannot be released: not
// Linux, no /proc, or a kernel without MADV_PAGEOUT (before 5.4).
var ErrUnsupported = errors.New("releasing binary pages is not supported here")
