package store

import (
	"time"
)

// Local execution states. PENDING: a run command waiting for its run_at;
// TRIGGERED: fired, waiting for a worker; RUNNING: a handler runs it;
// FINISHED (with an outcome), SKIPPED and INTERRUPTED are final here (the
// controller owns what happens next).
const (
	StatePending     = "PENDING"
	StateTriggered   = "TRIGGERED"
	StateRunning     = "RUNNING"
	StateFinished    = "FINISHED"
	StateSkipped     = "SKIPPED"
	StateInterrupted = "INTERRUPTED"
)

// Meta keys.
const (
	MetaAgentID     = "agent_id"
	MetaCursor      = "cmd_cursor"
	MetaClockOffset = "clock_offset"
	MetaShards      = "shards"
)

// Job is an assigned job.
type Job struct {
	// Ref is the row's local number (stable while the job is assigned).
	Ref        int64
	ID         string
	Generation uint64
	// Spec is the job as JSON (protocol.Job).
	Spec []byte
	// ShardIndex is -1 unless the job is a broadcast (mode all) job.
	ShardIndex, ShardTotal int
	// Epoch is the lease epoch of a group job (mode any); 0 otherwise.
	Epoch uint64
	// LeaseExpiry is informational (wall clock); leases are held in memory
	// on the monotonic clock and considered lost after a restart.
	LeaseExpiry time.Time
	// LastFire is the scheduled time of the last handled fire.
	LastFire time.Time
	// Skips is the job's run of skipped fires held with its last real
	// fire (Tx.SetSkips); zero when none is held.
	Skips Skips
}

// Skips is a run of a job's fires skipped by overlap and not reported
// yet, held in the job's row because a real fire after them moved
// last_fire past them: a restart finds them here rather than through the
// misfire policy, which sees only the fires after last_fire. N is the
// number of fires, First and Last their scheduled times, Epoch the lease
// epoch they were skipped under.
type Skips struct {
	N           int
	First, Last time.Time
	Epoch       uint64
}

// Exec is one attempt of an execution.
type Exec struct {
	ID       int64
	ExecID   string
	Attempt  int
	JobID    string
	State    string
	Priority int
	// Fine is 1 for precision fine (1 ms lane).
	Fine int
	// Concurrency is the job's per-agent limit when the attempt was made.
	Concurrency int
	// Periodic marks a fire of a periodic job made by the agent itself
	// (false: a run sent by the controller).
	Periodic    bool
	ScheduledAt time.Time
	RunAt       time.Time
	Epoch       uint64
	ShardIndex  int
	ShardTotal  int
	// Spec is the job as JSON: the run command's snapshot, or (when read
	// with Store.Exec) the assigned job's spec.
	Spec        []byte
	TriggeredAt time.Time
	StartedAt   time.Time
	FinishedAt  time.Time
	Outcome     string
	Result      []byte
}

// OutboxMsg is one report waiting for its PubAck.
type OutboxMsg struct {
	Seq     int64
	MsgID   string
	Subject string
	Data    []byte
	// Hold marks a report the outbox may hold back a while before it
	// publishes it (Tx.EnqueueHeld). It is not stored: a row read back
	// from the outbox (Store.Outbox) never has it.
	Hold bool
}

// Counts are the live row counts.
type Counts struct {
	Pending, Triggered, Running, Outbox int
}

func ns(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, v).UTC()
}
