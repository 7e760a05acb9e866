package api

import (
	"github.com/axsched/ax/pkg/protocol"
)

// AsFieldError is protocol.AsFieldError: a validation error of
// pkg/protocol, pkg/schedule, pkg/retry or pkg/payload as one
// *protocol.FieldError, so that callers handle a single type.
func AsFieldError(err error) (*protocol.FieldError, bool) { return protocol.AsFieldError(err) }
