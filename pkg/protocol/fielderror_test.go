package protocol

import (
	"errors"
	"fmt"
	"testing"

	"github.com/axsched/ax/pkg/payload"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// TestAsFieldError: the field errors of schedule, retry and payload come
// out as one *FieldError with their field and reason, wrapping ErrInvalid,
// also when wrapped; this package's own pass through; any other error is
// no field error.
func TestAsFieldError(t *testing.T) {
	own := &FieldError{Field: "payload", Reason: "is 40000 bytes", Err: ErrTooLarge}
	for _, tc := range []struct {
		name  string
		err   error
		field string
		is    error
	}{
		{"protocol", fmt.Errorf("create: %w", own), "payload", ErrTooLarge},
		{"schedule", fmt.Errorf("x: %w", &schedule.FieldError{Field: "schedule.every", Reason: "bad"}), "schedule.every", ErrInvalid},
		{"retry", &retry.FieldError{Field: "retry.base", Reason: "bad"}, "retry.base", ErrInvalid},
		{"payload", fmt.Errorf("x: %w", &payload.FieldError{Field: "payload.url", Reason: "is required"}), "payload.url", ErrInvalid},
	} {
		fe, ok := AsFieldError(tc.err)
		if !ok || fe.Field != tc.field || !errors.Is(fe, tc.is) || fe.Reason == "" {
			t.Errorf("%s: AsFieldError(%v) = %+v, %v; want field %s wrapping %v", tc.name, tc.err, fe, ok, tc.field, tc.is)
		}
	}
	if fe, ok := AsFieldError(errors.New("disk full")); ok || fe != nil {
		t.Errorf("a plain error came out as a field error: %+v", fe)
	}
}
