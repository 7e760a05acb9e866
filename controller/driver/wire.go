package driver

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/axsched/ax/pkg/protocol"
)

// Version is the version of the drive request and reply. It only goes up;
// a replica refuses a request of another version (its sender then sends
// the change's commands itself).
const Version = 1

// SubjectPrefix starts the subject a replica serves drive requests on:
// SubjectPrefix + its process instance. Only controllers publish there:
// on the embedded server it is in account AX, which agents reach only
// through their scoped imports (controller/auth).
const SubjectPrefix = "ax.ctl.drive."

// Subject returns the subject the replica process instance serves drive
// requests on.
func Subject(instance string) string { return SubjectPrefix + instance }

// MaxRequestSize bounds an encoded request: two jobs of at most
// protocol.MaxMessageSize each and the envelope.
const MaxRequestSize = 2*protocol.MaxMessageSize + 1024

// Refusal reasons of a Reply.
const (
	// ReasonNotOwner: the replica does not work the job's shard (any more).
	ReasonNotOwner = "not_owner"
	// ReasonInvalid: the request did not decode (DecodeRequest).
	ReasonInvalid = "invalid"
	// ReasonBusy: every worker of the replica is busy and its queue full.
	ReasonBusy = "busy"
	// ReasonStopping: the replica is stopping.
	ReasonStopping = "stopping"
)

// request is a drive request on the wire: one stored change of one job.
type request struct {
	V    int           `json:"v"`
	Job  string        `json:"job"`
	Rev  uint64        `json:"rev"`
	Old  *protocol.Job `json:"old,omitempty"`
	Next *protocol.Job `json:"next,omitempty"`
}

// Reply is the answer to a drive request: Done when the replica sent the
// change's commands, else Refused says why it did not.
type Reply struct {
	V       int    `json:"v"`
	Done    bool   `json:"done,omitempty"`
	Refused string `json:"refused,omitempty"`
}

// EncodeRequest encodes the drive request of ch.
func EncodeRequest(ch Change) ([]byte, error) {
	if err := ch.check(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(request{V: Version, Job: ch.JobID(), Rev: ch.Rev, Old: ch.Old, Next: ch.Next})
	if err != nil {
		return nil, fmt.Errorf("encode drive request: %w", err)
	}
	if len(data) > MaxRequestSize {
		return nil, fmt.Errorf("%w: request is %d bytes, at most %d", ErrBadRequest, len(data), MaxRequestSize)
	}
	return data, nil
}

// DecodeRequest decodes and checks a drive request: its version, a valid
// job id, a revision, at least one of old and next, both naming that job, and next of
// a later generation than old. Unknown fields are refused. Every error
// matches ErrBadRequest and names the field.
func DecodeRequest(data []byte) (Change, error) {
	if len(data) > MaxRequestSize {
		return Change{}, fmt.Errorf("%w: request is %d bytes, at most %d", ErrBadRequest, len(data), MaxRequestSize)
	}
	var r request
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Change{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if dec.More() {
		return Change{}, fmt.Errorf("%w: data after the request", ErrBadRequest)
	}
	if r.V != Version {
		return Change{}, fmt.Errorf("%w: v: version %d, this replica speaks %d", ErrBadRequest, r.V, Version)
	}
	if err := protocol.ValidateJobID("job", r.Job); err != nil {
		return Change{}, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	ch := Change{Old: r.Old, Next: r.Next, Rev: r.Rev}
	if err := ch.check(); err != nil {
		return Change{}, err
	}
	if ch.JobID() != r.Job {
		return Change{}, fmt.Errorf("%w: job: %q, but the change is of job %q", ErrBadRequest, r.Job, ch.JobID())
	}
	return ch, nil
}

// EncodeReply encodes r with the current version.
func EncodeReply(r Reply) []byte {
	r.V = Version
	data, _ := json.Marshal(r) // two plain fields: cannot fail
	return data
}

// DecodeReply decodes a drive reply: its version, and exactly one of done
// and refused. Every error matches ErrBadRequest.
func DecodeReply(data []byte) (Reply, error) {
	var r Reply
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Reply{}, fmt.Errorf("%w: reply: %w", ErrBadRequest, err)
	}
	switch {
	case r.V != Version:
		return Reply{}, fmt.Errorf("%w: reply v: version %d, this replica speaks %d", ErrBadRequest, r.V, Version)
	case r.Done == (r.Refused != ""):
		return Reply{}, fmt.Errorf("%w: reply: exactly one of done and refused must be set", ErrBadRequest)
	}
	return r, nil
}
