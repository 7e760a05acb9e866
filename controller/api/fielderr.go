package api

import (
	"errors"

	"github.com/axsched/ax/pkg/payload"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// AsFieldError returns a validation error of pkg/protocol, pkg/schedule,
// pkg/retry or pkg/payload as one *protocol.FieldError (protocol.Job.Validate
// passes schedule's and retry's through unchanged), so that callers handle a single type.
// ok=false for any other error.
func AsFieldError(err error) (*protocol.FieldError, bool) {
	var pe *protocol.FieldError
	if errors.As(err, &pe) {
		return pe, true
	}
	var se *schedule.FieldError
	if errors.As(err, &se) {
		return &protocol.FieldError{Field: se.Field, Reason: se.Reason, Err: protocol.ErrInvalid}, true
	}
	var re *retry.FieldError
	if errors.As(err, &re) {
		return &protocol.FieldError{Field: re.Field, Reason: re.Reason, Err: protocol.ErrInvalid}, true
	}
	var le *payload.FieldError
	if errors.As(err, &le) {
		return &protocol.FieldError{Field: le.Field, Reason: le.Reason, Err: protocol.ErrInvalid}, true
	}
	return nil, false
}
