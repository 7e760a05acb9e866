package payload

import "errors"

// ErrInvalid marks a payload that breaks a rule. The decoders' errors are
// *FieldError values wrapping it.
var ErrInvalid = errors.New("invalid payload")

// FieldError is a payload error that names its field with its dotted path
// as users write it ("payload.command").
type FieldError struct {
	// Field is the dotted path, e.g. "payload.url".
	Field string
	// Reason says what is wrong, e.g. "is required".
	Reason string
}

// Error returns "field: reason".
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func invalid(field, reason string) error { return &FieldError{Field: field, Reason: reason} }
