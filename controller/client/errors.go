package client

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/axsched/ax/pkg/apiv1"
	"github.com/axsched/ax/pkg/protocol"
)

// Sentinel errors; an *APIError matches the one of its code with errors.Is.
var (
	// ErrNotFound: the job, execution or route does not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrExists: a job with the same idempotency key exists; APIError.ID names it (409 already_exists).
	ErrExists = errors.New("already exists")
	// ErrConflict: the request contradicts the current state (409 conflict).
	ErrConflict = errors.New("conflict")
	// ErrNotReady: the controller is not ready (503).
	ErrNotReady = errors.New("controller not ready")
	// ErrUnauthorized: no or a wrong bearer token (401).
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: the token's role does not allow the call (403).
	ErrForbidden = errors.New("forbidden")
	// ErrInternal: the controller failed (500); the message carries a request id for its log.
	ErrInternal = errors.New("internal error")
	// ErrConfig: a bad argument to New.
	ErrConfig = errors.New("invalid client config")
)

// APIError is an error answer of the API.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Code is the machine-readable code (invalid, not_found, already_exists, ...).
	Code string
	// Message is the human-readable message; for field errors it starts with the field.
	Message string
	// Field names the offending field of the request, if any ("schedule.cron").
	Field string
	// ID is the existing job's id on already_exists.
	ID string
	// RequestID is the X-Request-Id of the answer, to find it in the controller's log.
	RequestID string
}

// Error returns the message, which names the field for field errors.
func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Field != "" && !startsWithField(msg, e.Field) {
		msg = e.Field + ": " + msg
	}
	return msg
}

func startsWithField(msg, field string) bool {
	return len(msg) > len(field) && msg[:len(field)] == field && msg[len(field)] == ':'
}

// Is matches the sentinel of the error's code or status.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrExists:
		return e.Code == apiv1.CodeExists
	case ErrConflict:
		return e.Code == apiv1.CodeConflict
	case ErrNotReady:
		return e.Status == http.StatusServiceUnavailable
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrForbidden:
		return e.Status == http.StatusForbidden
	case ErrInternal:
		return e.Status >= 500 && e.Status != http.StatusServiceUnavailable
	case protocol.ErrInvalid:
		return e.Code == apiv1.CodeInvalid || e.Status == http.StatusUnsupportedMediaType
	case protocol.ErrTooLarge:
		return e.Code == apiv1.CodeTooLarge
	}
	return false
}

// FieldError returns the error as a *protocol.FieldError when it names a
// field, so that callers can treat local and remote validation alike.
func (e *APIError) FieldError() (*protocol.FieldError, bool) {
	if e.Field == "" {
		return nil, false
	}
	sentinel := protocol.ErrInvalid
	if e.Code == apiv1.CodeTooLarge {
		sentinel = protocol.ErrTooLarge
	}
	reason := e.Message
	if startsWithField(reason, e.Field) {
		reason = reason[len(e.Field)+1:]
		for len(reason) > 0 && reason[0] == ' ' {
			reason = reason[1:]
		}
	}
	return &protocol.FieldError{Field: e.Field, Reason: reason, Err: sentinel}, true
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}
