package fleet

import "errors"

// Sentinel errors of the fleet's changes of agent records (EnrollAgent,
// RevokeAgent, LabelAgent). Match them with errors.Is. Their messages are
// those of the controller's sentinels of the same names, which the
// controller makes them match (controller.ErrNotFound, ErrExists,
// ErrConflict).
var (
	// ErrNotFound: the agent is neither enrolled nor registered
	// (LabelAgent), or not enrolled (RevokeAgent).
	ErrNotFound = errors.New("not found")
	// ErrExists: the agent is enrolled already (EnrollAgent without
	// Rotate).
	ErrExists = errors.New("already exists")
	// ErrConflict: the agent is revoked (LabelAgent), or the controller
	// runs without nats.auth: nkeys (EnrollAgent, RevokeAgent).
	ErrConflict = errors.New("conflict")
)

// Internal reasons a registration is refused (handleRegister).
var (
	errRegisterRevoked  = errors.New("agent is revoked")
	errRegisterCommands = errors.New("read the agent's commands")
)

// errAgentGone: the record of the agent was revoked or deleted while its
// heartbeat was being stored.
var errAgentGone = errors.New("agent revoked or removed meanwhile")

// errBadDigest: a value of ax_liveness that is not a digest.
var errBadDigest = errors.New("bad liveness digest")
