package protocol

import (
	"errors"
	"fmt"

	"github.com/axsched/ax/pkg/payload"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// Sentinel errors. Every validation error wraps exactly one of them, so
// callers match with errors.Is and read the field with errors.As(*FieldError).
var (
	// ErrInvalid marks a message or job that breaks a rule: missing or
	// unknown field, bad value, unsafe name.
	ErrInvalid = errors.New("invalid")
	// ErrVersion marks a message whose protocol version this build does not speak.
	ErrVersion = errors.New("unsupported protocol version")
	// ErrTooLarge marks data over a size limit (MaxMessageSize, MaxPayloadSize).
	ErrTooLarge = errors.New("too large")
)

// FieldError is a validation error that names the offending field with its
// path as users write it ("schedule.cron", "target.agent", "payload").
type FieldError struct {
	// Field is the dotted path of the field, e.g. "retry.max_attempts".
	Field string
	// Reason says what is wrong, e.g. "must be between 0 and 9".
	Reason string
	// Err is the sentinel this error wraps (ErrInvalid, ErrVersion, ErrTooLarge).
	Err error
}

// Error returns "field: reason".
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Unwrap returns the sentinel.
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(sentinel error, field, reason string) *FieldError {
	return &FieldError{Field: field, Reason: reason, Err: sentinel}
}

func fieldErrf(sentinel error, field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...), Err: sentinel}
}

func invalid(field, format string, args ...any) *FieldError {
	return fieldErrf(ErrInvalid, field, format, args...)
}

// prefixed returns err with its field path prefixed by prefix ("assign.job").
// Errors that are not *FieldError are wrapped as ErrInvalid on prefix.
func prefixed(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		f := prefix
		if fe.Field != "" {
			f = prefix + "." + fe.Field
		}
		return &FieldError{Field: f, Reason: fe.Reason, Err: fe.Err}
	}
	return &FieldError{Field: prefix, Reason: err.Error(), Err: ErrInvalid}
}

// fromPkg turns the field errors of pkg/schedule and pkg/retry into a
// *FieldError wrapping ErrInvalid, so that callers of this package match one
// kind of error.
func fromPkg(err error) error {
	var se *schedule.FieldError
	if errors.As(err, &se) {
		return &FieldError{Field: se.Field, Reason: se.Reason, Err: ErrInvalid}
	}
	var re *retry.FieldError
	if errors.As(err, &re) {
		return &FieldError{Field: re.Field, Reason: re.Reason, Err: ErrInvalid}
	}
	return &FieldError{Reason: err.Error(), Err: ErrInvalid}
}

// AsFieldError returns a validation error of this package, pkg/schedule,
// pkg/retry or pkg/payload as one *FieldError (Job.Validate passes
// schedule's and retry's through unchanged), wrapping ErrInvalid for the
// latter three; ok is false for any other error.
func AsFieldError(err error) (fe *FieldError, ok bool) {
	if errors.As(err, &fe) {
		return fe, true
	}
	var se *schedule.FieldError
	if errors.As(err, &se) {
		return &FieldError{Field: se.Field, Reason: se.Reason, Err: ErrInvalid}, true
	}
	var re *retry.FieldError
	if errors.As(err, &re) {
		return &FieldError{Field: re.Field, Reason: re.Reason, Err: ErrInvalid}, true
	}
	var pe *payload.FieldError
	if errors.As(err, &pe) {
		return &FieldError{Field: pe.Field, Reason: pe.Reason, Err: ErrInvalid}, true
	}
	return nil, false
}
