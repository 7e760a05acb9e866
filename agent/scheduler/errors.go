package scheduler

import "errors"

// ErrNoHandler marks a job whose handler is not registered on this agent.
var ErrNoHandler = errors.New("no such handler")
