package retry

import "errors"

// ErrInvalidPolicy marks a Policy that breaks a rule. Validate's errors are
// *FieldError values wrapping it.
var ErrInvalidPolicy = errors.New("invalid retry policy")

// FieldError is a validation error that names the offending field with its
// dotted path as users write it ("retry.max_attempts").
type FieldError struct {
	// Field is the dotted path, e.g. "retry.base".
	Field string
	// Reason says what is wrong, e.g. "must be >= 0, got -1s".
	Reason string
}

// Error returns "field: reason".
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap returns ErrInvalidPolicy.
func (e *FieldError) Unwrap() error { return ErrInvalidPolicy }
