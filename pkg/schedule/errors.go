package schedule

import "errors"

// Sentinel errors. Every validation error of this package is a *FieldError
// that wraps one of them, so callers match with errors.Is and read the field
// with errors.As.
var (
	// ErrInvalidSpec marks a schedule Spec that breaks a rule.
	ErrInvalidSpec = errors.New("invalid schedule")
	// ErrInvalidMisfire marks a Misfire policy that breaks a rule.
	ErrInvalidMisfire = errors.New("invalid misfire policy")
)

// FieldError is a validation error that names the offending field with its
// dotted path as users write it ("schedule.cron", "misfire.grace").
type FieldError struct {
	// Field is the dotted path, e.g. "schedule.timezone". It is "schedule"
	// for rules about the Spec as a whole (exactly one kind must be set).
	Field string
	// Reason says what is wrong, e.g. "expected 5 or 6 fields, got 3".
	Reason string
	// Err is the sentinel this error wraps (ErrInvalidSpec or ErrInvalidMisfire).
	Err error
	// Cause is the underlying error, if any (e.g. from the cron parser or
	// time.ParseDuration); it is matched by errors.Is/As too.
	Cause error
}

// Error returns "field: reason".
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Unwrap returns the sentinel and, when set, the underlying cause.
func (e *FieldError) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Err, e.Cause}
	}
	return []error{e.Err}
}

func specErr(field, reason string, cause error) *FieldError {
	return &FieldError{Field: field, Reason: reason, Err: ErrInvalidSpec, Cause: cause}
}

func misfireErr(field, reason string) *FieldError {
	return &FieldError{Field: field, Reason: reason, Err: ErrInvalidMisfire}
}
