package ingest

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// Stray assignments. An agent that fires a periodic job it must not hold
// holds an assignment whose unassign command it never got: the job was
// deleted, moved to another agent or made one-shot, and the controller
// that changed it was killed between its write to ax_jobs and the
// command; or the agent was offline for longer than AX_CMD keeps
// commands. Nothing else would ever take the job away: its fires are
// refused (unknown_job, not_assigned) and it keeps firing them.
//
// So the refusal of such a fire also sends the agent an unassign of the
// job, at the generation the controller has (the agent drops its copy only
// when it is that generation or older, so an assignment newer than the
// controller's possibly stale view stands), or of any generation when the
// job does not exist any more (job ids are never reused). Only refusals
// that the controller's own records prove: a job ax_jobs does not hold
// (read there, not only in the cache) or a deletion the cache saw, a job
// pinned to another agent, a one-shot job. Not a broadcast job's group
// membership, which the agent registry may not show yet on this replica,
// nor a group job's lease (the epochs fence those fires).
//
// A device decides what it reports, so the unassigns are bounded: at most
// one per agent and job per strayWindow, and at most strayPerAgent per
// agent per window; past that the fire is only refused. Each is published
// with a Msg-Id, though AX_CMD keeps the server's least de-duplication
// window (streams.CommandDuplicates): these limits are what bound them.

const (
	// strayWindow is the window of the stray unassign limits.
	strayWindow = time.Minute
	// strayPerAgent bounds the stray unassigns sent to one agent per window.
	strayPerAgent = 20
)

// strays holds the stray unassigns sent in the current window. Lanes of
// every shard call admit, hence the lock.
type strays struct {
	mu    sync.Mutex
	start time.Time
	sent  map[string]struct{} // agent + "\x00" + job
	per   map[string]int      // by agent
}

// admit reports whether an unassign of job may be sent to agent at now,
// and counts it when it may.
func (s *strays) admit(now time.Time, agent, job string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sent == nil || now.Sub(s.start) >= strayWindow || now.Before(s.start) {
		s.start, s.sent, s.per = now, map[string]struct{}{}, map[string]int{}
	}
	key := agent + "\x00" + job
	if _, done := s.sent[key]; done || s.per[agent] >= strayPerAgent {
		return false
	}
	s.sent[key] = struct{}{}
	s.per[agent]++
	return true
}

// strayMsgID is the Msg-Id of a stray unassign: stray/<agent>/<job>/<generation>.
func strayMsgID(agent, job string, gen uint64) string {
	return "stray/" + agent + "/" + job + "/" + strconv.FormatUint(gen, 10)
}

// stray is the unassign a refused fire calls for (authorizeCreate).
type stray struct {
	gen uint64 // the generation to remove; 0: any (the job does not exist)
	why string
}

// unassignStray sends r's agent the unassign st calls for, within the
// limits above. A failed publish is logged: the next refused fire after
// the window tries again.
func (c *Ingest) unassignStray(ctx context.Context, r protocol.Report, st stray) {
	if !c.strays.admit(c.now(), r.Agent, r.JobID) {
		return
	}
	cmd := protocol.Command{Kind: protocol.CmdUnassign, Agent: r.Agent,
		Unassign: &protocol.Unassign{JobID: r.JobID, Generation: st.gen, Reason: "stray: " + st.why}}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.host.PublishCommand(ctx, cmd, strayMsgID(r.Agent, r.JobID, st.gen)); err != nil {
		c.log.Warn("unassign a stray job", "agent", r.Agent, "job", r.JobID, "generation", st.gen, "err", err)
		return
	}
	c.m.StrayUnassigns.Inc()
	c.log.Info("stray job unassigned", "agent", r.Agent, "job", r.JobID, "generation", st.gen, "why", st.why)
}
