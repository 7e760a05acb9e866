package handler

import "errors"

// ErrConfig marks an invalid handler configuration.
var ErrConfig = errors.New("handler: invalid config")

// ErrNotAllowed marks a URL or redirect target that the agent's own
// http.allow does not admit.
var ErrNotAllowed = errors.New("refused by http.allow of this agent")

// ErrDuplicate marks a handler name registered twice.
var ErrDuplicate = errors.New("handler: name registered already")
