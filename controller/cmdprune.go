package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// AX_CMD keeps commands for agents that are offline (streams'
// DefaultCommandMaxAge, seven days), and agents read it with ordered
// consumers from a cursor in their own store, so the server never learns
// what an agent applied: every command stayed for the seven days. At 250
// one-shot runs a second that is 10.6 MiB a minute, about 100 GiB a week.
//
// So an agent's heartbeat carries the cursor its store holds
// (protocol.Heartbeat.Cursor, committed), the fleet keeps the highest one
// in the agent's record in ax_agents, and once a minute the replica that
// works the shard the agent's id hashes to removes from the agent's
// subject the commands below
//
//	min(stored cursor + 1, the agent's last command, first not older than the lag)
//
// (a purge by subject and sequence). Each bound keeps something a reader
// needs:
//
//   - The cursor as stored in ax_agents, not a heartbeat's in memory: an
//     agent whose store comes back below it (a restored copy, synchronous
//     NORMAL and a power loss) registers below its recorded cursor, which
//     the fleet takes as a lost store (controller/fleet's storeLost): it
//     resumes after its last command and is sent again its assignments and
//     the runs the controller waits for, never the commands removed.
//   - The agent's last command stays: a store that lost its state resumes
//     after it (lastCommandSeq, storeloss.go), and the stream's first
//     sequence stays at or below every agent's cursor + 1, so a
//     registration never takes removed commands for ones aged out
//     (controller/fleet's cursorBehind).
//   - Nothing stored less than cmdPruneLag (sentRunsSkew) before the oldest
//     write mark of any replica: a reload reads AX_CMD for the runs of the
//     records written since the oldest mark, from sentRunsSkew before the
//     oldest of them (sentruns.go), and finds every one of them there. The
//     bound is a sequence: each pass samples AX_CMD's last sequence with
//     this replica's clock, and the bound is the last sample taken at or
//     before the time (none yet: nothing is removed; the first passes after
//     a start wait out the lag).
//
// An agent that reports a cursor past its own last command is not pruned
// (and logged once): its cursor can only come from its own subject. What
// an agent claims moves only its own subject, which is all it can harm.
// Agents whose heartbeats carry no cursor (nats.report_cursor false, or
// built before 2026-12-06) keep their commands for the stream's age.

// cmdPruneInterval is how often applied commands are removed.
const cmdPruneInterval = time.Minute

// cmdSeqSamplesMax bounds the samples of AX_CMD's last sequence kept
// (three hours at the default interval); a lag reaching further back
// removes nothing.
const cmdSeqSamplesMax = 180

// pruneMark is what the pruner did last for an agent.
type pruneMark struct {
	bound uint64 // min(cursor+1, lag bound) of the last pass that read it
	below uint64 // its commands below this were removed
}

// cmdSeqSample is AX_CMD's last sequence at a time of this replica's clock.
type cmdSeqSample struct {
	at  time.Time
	seq uint64
}

// commandPruner removes from AX_CMD the commands agents applied (see
// above). Its state is its loop's alone.
type commandPruner struct {
	*core
	samples []cmdSeqSample // ascending by time
	// done is, per agent, the last pass's bound below the cursor and the
	// lag (min(cursor+1, lag bound)), and the sequence its commands were
	// last removed below: an agent whose bound did not move is not read
	// again.
	done map[string]pruneMark
	// warned holds the agents whose cursor past their last command was
	// logged.
	warned map[string]bool
}

func newCommandPruner(c *core) *commandPruner {
	return &commandPruner{core: c, done: map[string]pruneMark{}, warned: map[string]bool{}}
}

// loop runs a pass every cmdPruneEvery until ctx ends.
func (p *commandPruner) loop(ctx context.Context) {
	p.every(ctx, p.cfg.cmdPruneEvery, p.cfg.cmdPruneEvery, "remove applied commands from AX_CMD", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := p.pass(ctx)
		return err
	})
}

// sample records AX_CMD's last sequence seq at now.
func (p *commandPruner) sample(now time.Time, seq uint64) {
	if n := len(p.samples); n > 0 && now.Before(p.samples[n-1].at) {
		// The wall clock stepped back: the samples after now are not
		// "at or before" any time they claim.
		p.samples = p.samples[:0]
	}
	if len(p.samples) == cmdSeqSamplesMax {
		p.samples = append(p.samples[:0], p.samples[1:]...)
	}
	p.samples = append(p.samples, cmdSeqSample{at: now, seq: seq})
}

// seqAt returns the last sequence sampled at or before t (false: none).
func (p *commandPruner) seqAt(t time.Time) (uint64, bool) {
	var seq uint64
	ok := false
	for _, s := range p.samples {
		if s.at.After(t) {
			break
		}
		seq, ok = s.seq, true
	}
	return seq, ok
}

// pass prunes the agents of the shards this replica works once and
// returns how many it pruned.
func (p *commandPruner) pass(ctx context.Context) (int, error) {
	st, err := p.js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		return 0, fmt.Errorf("read AX_CMD: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("read AX_CMD: %w", err)
	}
	p.m.cmdBytes.Set(float64(info.State.Bytes))
	p.m.cmdMsgs.Set(float64(info.State.Msgs))
	now := p.now()
	p.sample(now, info.State.LastSeq)
	marks, err := p.readMarks(ctx)
	if err != nil {
		return 0, err
	}
	t := now
	if floor, ok := marksFloor(marks, p.cfg.marksMargin); ok && floor.Before(t) {
		t = floor
	}
	lagSeq, ok := p.seqAt(t.Add(-p.cfg.cmdPruneLag))
	if !ok {
		return 0, nil
	}
	type agentCursor struct {
		agent  string
		cursor uint64
	}
	var todo []agentCursor
	seen := map[string]bool{}
	p.fleet.Registry().StoredCursors(func(agent string, cursor uint64) {
		seen[agent] = true
		if !p.own.OwnsJob(agent) {
			return
		}
		if min(cursor+1, lagSeq+1) > p.done[agent].bound {
			todo = append(todo, agentCursor{agent, cursor})
		}
	})
	for a := range p.done {
		if !seen[a] {
			delete(p.done, a)
			delete(p.warned, a)
		}
	}
	pruned := 0
	var errs []error
	for _, a := range todo {
		if ctx.Err() != nil {
			break
		}
		did, err := p.pruneAgent(ctx, st, a.agent, a.cursor, lagSeq)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if did {
			pruned++
		}
	}
	return pruned, errors.Join(errs...)
}

// pruneAgent removes agent's commands below min(cursor+1, lagSeq+1, its
// last command) and reports whether it removed any.
func (p *commandPruner) pruneAgent(ctx context.Context, st jetstream.Stream, agent string, cursor, lagSeq uint64) (bool, error) {
	bound := min(cursor+1, lagSeq+1)
	mark := p.done[agent]
	last, err := p.lastCommandIn(ctx, st, agent)
	if err != nil {
		return false, err
	}
	if last == 0 { // nothing stored for it
		p.done[agent] = pruneMark{bound: bound, below: mark.below}
		return false, nil
	}
	if cursor > last {
		if !p.warned[agent] {
			p.warned[agent] = true
			p.log.Warn("agent reported a command cursor past its last command; its commands are kept",
				"agent", agent, "cursor", cursor, "last_command", last)
		}
		return false, nil
	}
	delete(p.warned, agent)
	below := min(bound, last)
	if below <= mark.below || below <= 1 {
		p.done[agent] = pruneMark{bound: bound, below: mark.below}
		return false, nil
	}
	subject := protocol.CommandSubject(agent)
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(below)); err != nil {
		return false, fmt.Errorf("remove applied commands of %s below %d: %w", agent, below, err)
	}
	p.done[agent] = pruneMark{bound: bound, below: below}
	p.m.cmdPrunes.Inc()
	return true, nil
}
