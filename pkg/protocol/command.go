package protocol

import "time"

// CommandKind names a controller → agent command.
type CommandKind string

// Command kinds.
const (
	// CmdAssign gives the agent a job to plan on its own wheel (periodic or pinned).
	CmdAssign CommandKind = "assign"
	// CmdUnassign takes a job away: the agent stops firing it.
	CmdUnassign CommandKind = "unassign"
	// CmdRun asks for one attempt of an execution at RunAt (controller-started runs and retries).
	CmdRun CommandKind = "run"
	// CmdCancel cancels an execution: a running handler's context is cancelled.
	CmdCancel CommandKind = "cancel"
	// CmdLeaseGrant grants or renews the lease of a group job (mode any) with an epoch.
	CmdLeaseGrant CommandKind = "lease_grant"
	// CmdLeaseRevoke revokes a group job's lease: the agent stops firing it at once.
	CmdLeaseRevoke CommandKind = "lease_revoke"
)

// Command is a message on ax.cmd.<agent>. Exactly the body of its Kind is set.
type Command struct {
	V        int         `json:"v"`
	Kind     CommandKind `json:"kind"`
	Agent    string      `json:"agent"`
	IssuedAt time.Time   `json:"issued_at"`

	Assign   *Assign   `json:"assign,omitempty"`
	Unassign *Unassign `json:"unassign,omitempty"`
	Run      *Run      `json:"run,omitempty"`
	Cancel   *Cancel   `json:"cancel,omitempty"`
	Lease    *Lease    `json:"lease,omitempty"`
}

// ShardSlot is an agent's place in a broadcast (mode all) job: index of total.
type ShardSlot struct {
	Index int `json:"index"`
	Total int `json:"total"`
}

// Assign gives a job to an agent.
type Assign struct {
	Job Job `json:"job"`
	// Shard is set for broadcast jobs.
	Shard *ShardSlot `json:"shard,omitempty"`
	// Epoch is the lease epoch of a group job (mode any); 0 otherwise. A
	// group job fires only while the agent holds a valid lease of this epoch.
	Epoch uint64 `json:"epoch,omitempty"`
}

// Unassign takes a job away.
type Unassign struct {
	JobID string `json:"job_id"`
	// Generation is the job generation being removed; 0 removes any. The
	// agent keeps it (the generation the job was taken at) and refuses an
	// assign of an older generation that arrives after it (commands of two
	// controller replicas crossing).
	Generation uint64 `json:"generation,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// Run asks for one attempt of an execution.
type Run struct {
	Job     Job       `json:"job"`
	ExecID  string    `json:"exec_id"`
	Attempt int       `json:"attempt"`
	RunAt   time.Time `json:"run_at"`
	Epoch   uint64    `json:"epoch,omitempty"`
}

// Cancel cancels an execution.
type Cancel struct {
	ExecID string `json:"exec_id"`
	Reason string `json:"reason,omitempty"`
}

// Lease grants, renews or revokes a group job's lease.
type Lease struct {
	JobID string `json:"job_id"`
	Epoch uint64 `json:"epoch"`
	// TTL is how long the lease is valid from when the agent receives it,
	// measured on the agent's monotonic clock. Zero in a revoke.
	TTL Duration `json:"ttl,omitempty"`
}

// MaxAttempt bounds an attempt number.
const MaxAttempt = 1000

// Validate checks a command.
func (c Command) Validate() error { return c.validate(false) }

// validate checks a command; with jobChecked, a run's job is taken as
// valid (EncodeRun: its sender validated it before storing it).
func (c Command) validate(jobChecked bool) error {
	if err := checkVersion(c.V); err != nil {
		return err
	}
	if err := ValidateName("agent", c.Agent); err != nil {
		return err
	}
	bodies := 0
	for _, set := range []bool{c.Assign != nil, c.Unassign != nil, c.Run != nil, c.Cancel != nil, c.Lease != nil} {
		if set {
			bodies++
		}
	}
	if bodies != 1 {
		return invalid("kind", "a command carries exactly one body, got %d", bodies)
	}
	switch c.Kind {
	case CmdAssign:
		if c.Assign == nil {
			return invalid("assign", "is required for kind assign")
		}
		return prefixed("assign", c.Assign.Validate())
	case CmdUnassign:
		if c.Unassign == nil {
			return invalid("unassign", "is required for kind unassign")
		}
		return prefixed("unassign", ValidateJobID("job_id", c.Unassign.JobID))
	case CmdRun:
		if c.Run == nil {
			return invalid("run", "is required for kind run")
		}
		return prefixed("run", c.Run.validate(jobChecked))
	case CmdCancel:
		if c.Cancel == nil {
			return invalid("cancel", "is required for kind cancel")
		}
		_, _, err := ParseExecID("exec_id", c.Cancel.ExecID)
		return prefixed("cancel", err)
	case CmdLeaseGrant, CmdLeaseRevoke:
		if c.Lease == nil {
			return invalid("lease", "is required for kind %s", c.Kind)
		}
		return prefixed("lease", c.Lease.validate(c.Kind == CmdLeaseGrant))
	case "":
		return invalid("kind", "is required")
	default:
		return invalid("kind", "unknown command kind %q", c.Kind)
	}
}

// Validate checks an assign body.
func (a Assign) Validate() error {
	if a.Job.ID == "" {
		return invalid("job.id", "is required")
	}
	if err := prefixed("job", a.Job.Validate()); err != nil {
		return err
	}
	if a.Shard != nil && (a.Shard.Total < 1 || a.Shard.Index < 0 || a.Shard.Index >= a.Shard.Total) {
		return invalid("shard", "index %d of total %d is out of range", a.Shard.Index, a.Shard.Total)
	}
	return nil
}

// Validate checks a run body.
func (r Run) Validate() error { return r.validate(false) }

// validate checks a run body; with jobChecked, the job is taken as valid
// but for its id.
func (r Run) validate(jobChecked bool) error {
	if r.Job.ID == "" {
		return invalid("job.id", "is required")
	}
	if !jobChecked {
		if err := prefixed("job", r.Job.Validate()); err != nil {
			return err
		}
	}
	jobID, _, err := ParseExecID("exec_id", r.ExecID)
	if err != nil {
		return err
	}
	if jobID != r.Job.ID {
		return invalid("exec_id", "%q does not belong to job %q", r.ExecID, r.Job.ID)
	}
	if r.Attempt < 1 || r.Attempt > MaxAttempt {
		return invalid("attempt", "must be between 1 and %d, got %d", MaxAttempt, r.Attempt)
	}
	if r.RunAt.IsZero() {
		return invalid("run_at", "is required")
	}
	return nil
}

func (l Lease) validate(grant bool) error {
	if err := ValidateJobID("job_id", l.JobID); err != nil {
		return err
	}
	if l.Epoch == 0 {
		return invalid("epoch", "must be ≥ 1")
	}
	if grant && l.TTL <= 0 {
		return invalid("ttl", "must be > 0 in a grant")
	}
	return nil
}

// DecodeCommand decodes and validates a command.
func DecodeCommand(data []byte) (Command, error) { return decodeAs[Command](data) }
