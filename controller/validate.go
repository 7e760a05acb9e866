package controller

import (
	"fmt"

	"github.com/axsched/ax/pkg/payload"
	"github.com/axsched/ax/pkg/protocol"
)

// invalidField returns a *protocol.FieldError wrapping protocol.ErrInvalid.
func invalidField(field, format string, args ...any) error {
	return &protocol.FieldError{Field: field, Reason: fmt.Sprintf(format, args...), Err: protocol.ErrInvalid}
}

// fieldError normalizes a validation error of pkg/protocol, pkg/schedule,
// pkg/retry or pkg/payload into a *protocol.FieldError
// (protocol.AsFieldError), so that callers match one type; any other
// error becomes one without a field, wrapping protocol.ErrInvalid.
func fieldError(err error) error {
	if err == nil {
		return nil
	}
	if fe, ok := protocol.AsFieldError(err); ok {
		return fe
	}
	return &protocol.FieldError{Reason: err.Error(), Err: protocol.ErrInvalid}
}

// validateSpec checks a job spec as a client sends it, beyond
// protocol.Job.Validate: the controller's own rules, and the payload of a
// built-in handler (exec, http) as the agent will decode it. Jobs already
// stored are not checked again when they are read back: a job created
// before the payload check keeps running, and its agent refuses a bad
// payload as before.
func validateSpec(j protocol.Job) error {
	if err := j.Validate(); err != nil {
		return fieldError(err)
	}
	if err := payload.Validate(j.Handler, j.Payload); err != nil {
		return fieldError(err)
	}
	if j.Retry.MaxAttempts > protocol.MaxAttempt {
		return invalidField("retry.max_attempts", "must be at most %d, got %d", protocol.MaxAttempt, j.Retry.MaxAttempts)
	}
	return nil
}

// validateNew checks a create request: the controller sets id, generation
// and created_at.
func validateNew(j protocol.Job) error {
	if j.ID != "" {
		return invalidField("id", "must be empty on create; the controller assigns it")
	}
	if j.Generation != 0 {
		return invalidField("generation", "is set by the controller; leave it out on create")
	}
	if !j.CreatedAt.IsZero() {
		return invalidField("created_at", "is set by the controller; leave it out on create")
	}
	return validateSpec(j)
}
