//go:build !linux

package binpages

import "fmt"

// Release releases nothing outside Linux: it returns an error wrapping
// ErrUnsupported.
func Release() (Result, error) {
	return Result{}, fmt.Errorf("%w: not Linux", ErrUnsupported)
}
