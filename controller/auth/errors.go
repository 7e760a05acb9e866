package auth

import "errors"

// Sentinel errors of the package; match them with errors.Is.
var (
	// ErrNotEnrolled is returned for an agent id that has no identity.
	ErrNotEnrolled = errors.New("agent not enrolled")
	// ErrAlreadyEnrolled is returned when enrolling an id that already has an
	// identity without asking to rotate its key.
	ErrAlreadyEnrolled = errors.New("agent already enrolled")
	// ErrInvalid marks invalid input (agent id, labels, mode); the error names the field.
	ErrInvalid = errors.New("invalid")
	// ErrRegistry marks an unreadable or unwritable registry file.
	ErrRegistry = errors.New("auth registry")
	// ErrRegistryMissing is returned by Open when the controller's key
	// exists but the registry file does not.
	ErrRegistryMissing = errors.New("auth registry missing")
)
