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
	// ErrSilent: the replica asked did not answer within Config.Timeout
	// (frozen, or cut off without its connection closing); Drive sent the
	// commands itself.
	ErrSilent = errors.New("replica did not answer")
	// ErrNotAsked: the replica that works the job's shard did not answer a
	// request within Config.Hold before (ErrSilent), so Drive sent the
	// commands itself without asking it again.
	ErrNotAsked = errors.New("replica not asked: silent lately")
)
