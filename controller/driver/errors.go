package driver

import "errors"

// Sentinel errors of the package. Match them with errors.Is.
var (
	// ErrBadRequest: a drive request or reply does not decode or does not
	// hold together (DecodeRequest, DecodeReply); the error names the field.
	ErrBadRequest = errors.New("bad drive message")
	// ErrRefused: the replica asked to send a change's commands did not
	// take it (it no longer works the job's shard, it is stopping, or its
	// workers are all busy); Drive then sends them itself.
	ErrRefused = errors.New("drive request refused")
)
