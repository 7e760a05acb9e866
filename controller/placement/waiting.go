package placement

import (
	"context"
	"errors"
	"time"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/fleet"
	"github.com/axsched/ax/pkg/protocol"
)

// PlaceWaiting gives the PENDING executions waiting for an agent of their
// group to a live member. Registrations place them too (PlaceUnplaced),
// but a registration may be answered by another replica than the one
// that knows the waiting execution. The ownership loop calls it once a
// pass (lease.OwnershipHost). It takes the assign lock.
func (p *Placer) PlaceWaiting(ctx context.Context, now time.Time) {
	p.assign.Lock()
	defer p.assign.Unlock()
	if len(p.unplaced) == 0 {
		return
	}
	p.cancelUnplacedOf(ctx, "") // of jobs deleted through another replica
	for _, a := range p.agents.Snapshot() {
		if fleet.IsOnline(a, now, p.cfg.AgentOfflineAfter) {
			p.PlaceUnplaced(ctx, a)
		}
	}
}

// PlaceUnplaced gives the PENDING executions that wait for an agent of
// their group to agent a, if it matches. Called with the assign lock held
// (fleet.Host).
func (p *Placer) PlaceUnplaced(ctx context.Context, a protocol.AgentInfo) {
	for execID, jobID := range p.unplaced {
		j, _, ok := p.jobs.Get(jobID)
		if !ok {
			// Not in the cache: deleted, or not seen yet (another
			// replica's create): only a deleted job's are dropped.
			if err := p.host.SeeJob(ctx, jobID); err != nil {
				continue // the next pass looks again
			}
			if j, _, ok = p.jobs.Get(jobID); !ok {
				p.dropUnplaced(ctx, execID, jobID)
				continue
			}
		}
		if len(fleet.GroupMembers(j, []protocol.AgentInfo{a})) == 0 {
			continue
		}
		p.placeOne(ctx, execID, j, a)
	}
}

// placeOne gives unplaced execution execID of j to agent a and sends its
// run. Called with the assign lock held.
func (p *Placer) placeOne(ctx context.Context, execID string, j protocol.Job, a protocol.AgentInfo) {
	ctx, op := p.marks.Begin(ctx)
	defer op.End()
	after, effs, err := p.host.ApplyExec(ctx, execID, execution.Place{Agent: a.Agent})
	if errors.Is(err, execution.ErrMovedOn) {
		delete(p.unplaced, execID)
		return
	}
	if err != nil {
		p.log.Warn("place execution", "exec", execID, "agent", a.Agent, "err", err)
		return
	}
	delete(p.unplaced, execID)
	if err := p.host.ExecEffects(ctx, after, &j, effs); err != nil {
		p.log.Warn("send run of placed execution", "exec", execID, "agent", a.Agent, "err", err)
		return
	}
	p.log.Info("execution placed", "exec", execID, "agent", a.Agent)
}

// cancelUnplacedOf cancels the unplaced executions of deleted job jobID
// (all deleted jobs' when jobID is "") and forgets them. Called with the
// assign lock held.
func (p *Placer) cancelUnplacedOf(ctx context.Context, jobID string) {
	for execID, j := range p.unplaced {
		if jobID != "" && j != jobID {
			continue
		}
		if jobID == "" {
			if p.jobs.Has(j) {
				continue
			}
			if err := p.host.SeeJob(ctx, j); err != nil || p.jobs.Has(j) {
				continue // not seen before (another replica's create), or not readable now
			}
		}
		p.dropUnplaced(ctx, execID, j)
	}
}

// dropUnplaced forgets unplaced execution execID of job jobID, which the
// job cache no longer holds, cancelling it first if the job is deleted;
// one whose cancel failed stays, for the next pass. Called with the
// assign lock held.
func (p *Placer) dropUnplaced(ctx context.Context, execID, jobID string) {
	if _, err := p.host.CancelDeletedJobRun(ctx, execID, jobID, false); err != nil {
		p.log.Warn("cancel execution of a deleted job", "exec", execID, "job", jobID, "err", err)
		return
	}
	delete(p.unplaced, execID)
}
