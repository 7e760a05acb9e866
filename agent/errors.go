package agent

import (
	"errors"

	"github.com/axsched/ax/agent/scheduler"
)

// Sentinel errors.
var (
	// ErrConfig marks an invalid Config; the message names the key.
	ErrConfig = errors.New("invalid agent config")
	// ErrStopped is returned by Run when it was already run.
	ErrStopped = errors.New("agent already ran")
	// ErrNoHandler marks a job whose handler is not registered on this agent.
	ErrNoHandler = scheduler.ErrNoHandler
)
