package scheduler

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/axsched/ax/agent/handler"
	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
)

// Host is what the scheduler asks of the agent that runs it: the four
// things it does not own. Every method is safe from any goroutine and
// never blocks.
type Host interface {
	// ClockOffset is the controller's clock minus the agent's, as last
	// measured by the link (0 before). Reports carry controller-corrected
	// times, clock.max_skew compares it, on_skew adopt plans on it.
	ClockOffset() time.Duration
	// EncodeReport completes a report (version, agent, At when zero, step
	// times corrected by the offset) and encodes it for the outbox.
	EncodeReport(protocol.Report) (Report, error)
	// KickOutbox says that reports were committed to the outbox.
	KickOutbox()
	// KickHeartbeat asks for a heartbeat now: a group job's lease to claim.
	KickHeartbeat()
}

// Report is a report ready for the outbox: encoded outside the store's
// writer, enqueued inside the transaction of the step it reports.
type Report struct {
	MsgID, Subject string
	Data           []byte
	// Hold: the outbox may hold the report back a while, waiting for the
	// attempt's next step (agent outbox.hold): the triggered and running
	// reports of a run the controller sent and of a fire of a periodic
	// job (whose record the controller makes from the first report that
	// reaches it, in the state that report brings), but not under a group
	// lease (epoch > 0: its lease and their moves follow the reports).
	Hold bool
}

// Enqueue puts the report into the outbox in tx.
func (r Report) Enqueue(tx *store.Tx) error {
	if r.Hold {
		return tx.EnqueueHeld(r.MsgID, r.Subject, r.Data)
	}
	return tx.Enqueue(r.MsgID, r.Subject, r.Data)
}

// Config is what New needs: the parts the scheduler uses (the store, the
// clock, the handlers, the logger) and the settings it follows.
type Config struct {
	// AgentID is this agent's id: a command for another agent is skipped.
	AgentID string
	// Store is the agent's store (jobs, attempts, outbox, cursor).
	Store *store.Store
	// Clock is read for every time (wheels, lags, leases, timers).
	Clock clock.Clock
	// Handlers run the attempts.
	Handlers *handler.Registry
	// Log is the logger.
	Log *slog.Logger

	// Workers is the number of attempts run at once (workers).
	Workers int
	// QueueSize bounds the attempts in memory (queue.size); the rest wait
	// in SQLite.
	QueueSize int
	// AgingStep raises a waiting attempt's priority by one per step.
	AgingStep time.Duration
	// SlowStartFraction: while a backlog found at start drains, only
	// Workers/SlowStartFraction workers run.
	SlowStartFraction int
	// Grace is how long running handlers get at shutdown.
	Grace time.Duration
	// Retention keeps final attempts this long; PruneInterval is how often
	// older ones are deleted.
	Retention, PruneInterval time.Duration
	// JumpThreshold: wall and monotonic time diverging by more re-plans.
	JumpThreshold time.Duration
	// MaxSkew is the clock offset over which the agent refuses to fire,
	// or, with AdoptSkew, plans on controller time.
	MaxSkew   time.Duration
	AdoptSkew bool
	// CoalesceSkipped writes a job's fires skipped by overlap as one row
	// and report with their count, once the first of them is
	// SkippedWindow old (at a tick; 0: the next tick); a real fire in
	// between holds them in the job's row (skips.go).
	CoalesceSkipped bool
	SkippedWindow   time.Duration
}

// Origin is what a report's encoding takes from the agent that sends it.
type Origin struct {
	// Agent is the agent's id.
	Agent string
	// MsgSalt prefixes the Nats-Msg-Id: AX_RPT de-duplicates by Msg-Id
	// across all agents, so a guessable id (exec_id/attempt/kind) would
	// let another agent publish it first and have this report dropped.
	MsgSalt string
	// Shards is the number of report subjects' shards.
	Shards int
	// Offset is the controller's clock minus the agent's.
	Offset time.Duration
	// Now reads the agent's clock (for the report's At when it is zero).
	Now func() time.Time
}

// EncodeReport completes and encodes a report from o: version, agent, At
// (o.Now() unless set) and the step times, all on controller-corrected
// time; a result message is cut to protocol.MaxMessageLen.
func EncodeReport(r protocol.Report, o Origin) (Report, error) {
	at := func(t time.Time) time.Time { return t.Round(0).Add(o.Offset).UTC() }
	r.V = protocol.Version
	r.Agent = o.Agent
	if r.At.IsZero() {
		r.At = at(o.Now())
	}
	if !r.TriggeredAt.IsZero() {
		r.TriggeredAt = at(r.TriggeredAt)
	}
	if !r.StartedAt.IsZero() {
		r.StartedAt = at(r.StartedAt)
	}
	if r.Result != nil && len(r.Result.Message) > protocol.MaxMessageLen {
		rr := *r.Result
		rr.Message = rr.Message[:protocol.MaxMessageLen-len("…")] + "…"
		r.Result = &rr
	}
	data, err := protocol.Encode(r)
	if err != nil {
		return Report{}, fmt.Errorf("encode %s report of %s: %w", r.Kind, r.ExecID, err)
	}
	subject := protocol.ReportSubject(protocol.Shard(r.JobID, o.Shards), o.Agent)
	return Report{MsgID: o.MsgSalt + "/" + r.MsgID(), Subject: subject, Data: data}, nil
}
