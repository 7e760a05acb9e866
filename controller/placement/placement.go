package placement

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/controller/jobcache"
	"github.com/axsched/ax/controller/writemark"
	"github.com/axsched/ax/pkg/protocol"
)

// Host is what the placement asks of the rest of the controller: the
// commands to agents and the changes of executions. Every method is
// called with the assign lock (Env.Assign) held, so none may take it.
type Host interface {
	// PublishCommand sends cmd to its agent through AX_CMD; msgID is the
	// stream's deduplication id ("" for none).
	PublishCommand(ctx context.Context, cmd protocol.Command, msgID string) error
	// ApplyExec applies ev to the current record of execution execID and
	// stores the result; after is nil when nothing was written, err is
	// the refusal of execution.Apply (matching execution.ErrMovedOn and
	// the like) or a store error. ctx carries the write op (writemark).
	ApplyExec(ctx context.Context, execID string, ev execution.Event) (after *execution.Record, effs []execution.Effect, err error)
	// ExecEffects carries out the effects of a change of execution rec of
	// job (events, the run command) and waits for their events.
	ExecEffects(ctx context.Context, rec *execution.Record, job *protocol.Job, effs []execution.Effect) error
	// CancelDeletedJobRun cancels PENDING execution execID of job jobID if
	// the job is deleted in ax_jobs (unsent: AX_CMD holds no run of it);
	// it reports whether the execution was cancelled.
	CancelDeletedJobRun(ctx context.Context, execID, jobID string, unsent bool) (bool, error)
	// SeeJob makes the job cache have seen job id, live or deleted, when
	// ax_jobs holds it: a job the cache has not seen (its watcher behind
	// another replica's write) is read. An error is that read failing.
	SeeJob(ctx context.Context, id string) error
}

// Config is the placement's part of the controller's Config.
type Config struct {
	// AgentOfflineAfter: an agent not heard from for this long is
	// offline; a run of mode any goes to an online member when there is
	// one, and waiting executions go to online members only.
	AgentOfflineAfter time.Duration
}

// Env is what the placement is given at construction (New): its
// configuration and the controller's plain dependencies.
type Env struct {
	Config Config
	Log    *slog.Logger
	Now    func() time.Time // the clock in UTC, as written to KV
	// Assign serializes assignment decisions and guards the executions
	// waiting for an agent (the controller's assignMu, also the fleet's
	// fleet.Env.Assign); it is taken after an agent's lock, never before.
	Assign sync.Locker
	// Jobs is the controller's job cache (read only).
	Jobs *jobcache.Cache
	// Agents is the fleet's registry of agents (read only).
	Agents *fleet.Registry
	// Marks tracks the changes this replica makes to executions on its
	// own (writemark): a placed execution is one.
	Marks *writemark.Tracker
}

// Placer decides which agents run a job, sends them its assignments and
// gives the executions waiting for an agent of their group to one. Make
// one with New.
type Placer struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	assign sync.Locker
	jobs   *jobcache.Cache
	agents *fleet.Registry
	marks  *writemark.Tracker
	host   Host

	// unplaced: exec id → job id of the PENDING executions without an
	// agent. Guarded by assign.
	unplaced map[string]string
}

// New returns the placement of e, asking host for the rest.
func New(e Env, host Host) *Placer {
	return &Placer{
		cfg: e.Config, log: e.Log, now: e.Now, assign: e.Assign, jobs: e.Jobs, agents: e.Agents, marks: e.Marks,
		host: host, unplaced: map[string]string{},
	}
}

// NoteWaiting remembers PENDING execution execID of job jobID, which has
// no agent yet (execution.WaitForAgent), until an agent of its group is
// there. It takes the assign lock.
func (p *Placer) NoteWaiting(execID, jobID string) {
	p.assign.Lock()
	p.unplaced[execID] = jobID
	p.assign.Unlock()
}

// ForgetWaiting forgets execution execID: it no longer waits for an agent
// (execution.ForgetWaiting), or its record was removed. It takes the
// assign lock.
func (p *Placer) ForgetWaiting(execID string) {
	p.assign.Lock()
	delete(p.unplaced, execID)
	p.assign.Unlock()
}

// Waiting returns how many executions wait for an agent of their group.
// It takes the assign lock.
func (p *Placer) Waiting() int {
	p.assign.Lock()
	defer p.assign.Unlock()
	return len(p.unplaced)
}
