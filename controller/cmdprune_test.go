package controller

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

// pruneTestConfig is a controller whose pruner only runs when a test
// calls its pass, with no lag behind the write marks, and whose
// heartbeats are all written to ax_agents (agent_offline_after at the
// heartbeat interval leaves no room for a liveness digest), so that a
// heartbeat's cursor is stored at once.
func pruneTestConfig(t testing.TB) Config {
	cfg := testConfig(t, t.TempDir())
	cfg.cmdPruneEvery = time.Hour
	cfg.cmdPruneLag = time.Nanosecond
	cfg.marksMargin = time.Nanosecond
	cfg.AgentOfflineAfter = cfg.HeartbeatInterval
	return cfg
}

// commandSeqs returns the stream sequences of the run commands a received.
func (a *testAgent) commandSeqs() []uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []uint64
	for _, c := range a.cmds {
		if c.cmd.Kind == protocol.CmdRun {
			out = append(out, c.seq)
		}
	}
	return out
}

// commandsHeld returns how many commands AX_CMD holds for agent.
func commandsHeld(t *testing.T, js jetstream.JetStream, agent string) uint64 {
	t.Helper()
	ctx := tctx(t)
	st, err := js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	subject := protocol.CommandSubject(agent)
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// storedCursor returns agent's command cursor as the registry last read
// it from ax_agents (0: none).
func storedCursor(c *Controller, agent string) uint64 {
	var got uint64
	c.fleet.Registry().StoredCursors(func(a string, cursor uint64) {
		if a == agent {
			got = cursor
		}
	})
	return got
}

// prunePass runs passes of p until one prunes something (the first ones
// after a start have no sample of AX_CMD old enough yet) and returns how
// many agents it pruned.
func prunePass(t *testing.T, p *commandPruner) int {
	t.Helper()
	n := 0
	eventually(t, 20*time.Second, "a pass of the pruner that removes commands", func() bool {
		var err error
		n, err = p.pass(tctx(t))
		if err != nil {
			t.Fatalf("pass: %v", err)
		}
		return n > 0
	})
	return n
}

// TestCommandPruneFollowsStoredCursor: the commands an agent applied (up
// to the cursor its heartbeats report, once stored in ax_agents) are
// removed from AX_CMD, never those after it, never its last command, and
// never another agent's; an agent that comes back below its stored cursor
// is taken as one whose store lost its state (it resumes after its last
// command), so it cannot miss what was removed.
func TestCommandPruneFollowsStoredCursor(t *testing.T) {
	cfg := pruneTestConfig(t)
	c := startController(t, cfg)
	js := clientJS(t, c.NATSURL())
	a := newTestAgent(t, c.NATSURL(), "edge-prune", nil).start()
	b := newTestAgent(t, c.NATSURL(), "edge-keep", nil).start()
	ctx := tctx(t)
	const runs = 5
	mustCreateJobs(t, ctx, c, asapJobs(a.id, runs))
	mustCreateJobs(t, ctx, c, asapJobs(b.id, runs))
	eventually(t, 20*time.Second, "every run command received", func() bool {
		return len(a.commandSeqs()) == runs && len(b.commandSeqs()) == runs
	})
	seqs := a.commandSeqs()
	p := newCommandPruner(c.core)
	if n, err := p.pass(ctx); err != nil || n != 0 {
		t.Fatalf("pass before any cursor was reported = %d, %v; want 0 agents pruned", n, err)
	}

	// a applied its first three commands; b reports nothing.
	a.sendHeartbeat(protocol.Heartbeat{Cursor: seqs[2]})
	eventually(t, 10*time.Second, "a's cursor stored", func() bool { return storedCursor(c, a.id) == seqs[2] })
	if n := prunePass(t, p); n != 1 {
		t.Fatalf("pruned %d agents, want 1", n)
	}
	if got := commandsHeld(t, js, a.id); got != runs-3 {
		t.Fatalf("AX_CMD holds %d commands of %s after its cursor reached the third, want %d", got, a.id, runs-3)
	}
	if got := commandsHeld(t, js, b.id); got != runs {
		t.Fatalf("AX_CMD holds %d commands of %s (no cursor reported), want %d", got, b.id, runs)
	}

	// a applied everything: its last command stays.
	a.sendHeartbeat(protocol.Heartbeat{Cursor: seqs[runs-1]})
	eventually(t, 10*time.Second, "a's cursor stored", func() bool { return storedCursor(c, a.id) == seqs[runs-1] })
	prunePass(t, p)
	if got := commandsHeld(t, js, a.id); got != 1 {
		t.Fatalf("AX_CMD holds %d commands of %s after its cursor reached its last, want 1 (the last)", got, a.id)
	}

	// A store that comes back below the stored cursor (a restored copy)
	// resumes after the last command sent, not at what was removed.
	rr, err := a.tryRegister(seqs[1])
	if err != nil {
		t.Fatal(err)
	}
	if rr.ResumeAfter != seqs[runs-1] {
		t.Fatalf("registration below the stored cursor: resume_after %d, want the last command %d", rr.ResumeAfter, seqs[runs-1])
	}
	if got := commandsHeld(t, js, b.id); got != runs {
		t.Fatalf("AX_CMD holds %d commands of %s, want %d", got, b.id, runs)
	}
}

// TestCommandPruneRefusesCursorPastOwnCommands: an agent that claims a
// cursor past its own last command (it can only have read its own subject)
// has nothing removed, and what it claims never reaches another agent's
// commands.
func TestCommandPruneRefusesCursorPastOwnCommands(t *testing.T) {
	cfg := pruneTestConfig(t)
	c := startController(t, cfg)
	js := clientJS(t, c.NATSURL())
	a := newTestAgent(t, c.NATSURL(), "edge-liar", nil).start()
	b := newTestAgent(t, c.NATSURL(), "edge-other", nil).start()
	ctx := tctx(t)
	mustCreateJobs(t, ctx, c, asapJobs(a.id, 3))
	mustCreateJobs(t, ctx, c, asapJobs(b.id, 1))
	eventually(t, 20*time.Second, "every run command received", func() bool {
		return len(a.commandSeqs()) == 3 && len(b.commandSeqs()) == 1
	})
	// b's command is after a's last: a's claim covers it.
	claim := b.commandSeqs()[0] + 1000
	a.sendHeartbeat(protocol.Heartbeat{Cursor: claim})
	eventually(t, 10*time.Second, "a's claim stored", func() bool { return storedCursor(c, a.id) == claim })
	p := newCommandPruner(c.core)
	// Passes until one has a sample old enough to prune with: b's own
	// cursor, reported too, proves the passes prune.
	b.sendHeartbeat(protocol.Heartbeat{Cursor: b.commandSeqs()[0]})
	eventually(t, 10*time.Second, "b's cursor stored", func() bool { return storedCursor(c, b.id) == b.commandSeqs()[0] })
	prunePass(t, p)
	if got := commandsHeld(t, js, a.id); got != 3 {
		t.Fatalf("AX_CMD holds %d commands of %s after a cursor past its last command, want all 3", got, a.id)
	}
	if got := commandsHeld(t, js, b.id); got != 1 {
		t.Fatalf("AX_CMD holds %d commands of %s, want its last (1)", got, b.id)
	}
	if !p.warned[a.id] {
		t.Fatalf("the claim of %s was not noted", a.id)
	}
}

// TestCommandPruneKeepsWhatAReloadReads: commands stored less than the lag
// before the oldest write mark stay, whatever the agent applied: a reload
// reads them to tell which runs went out (sentruns.go).
func TestCommandPruneKeepsWhatAReloadReads(t *testing.T) {
	cfg := pruneTestConfig(t)
	cfg.cmdPruneLag = time.Hour
	c := startController(t, cfg)
	js := clientJS(t, c.NATSURL())
	a := newTestAgent(t, c.NATSURL(), "edge-lag", nil).start()
	ctx := tctx(t)
	mustCreateJobs(t, ctx, c, asapJobs(a.id, 3))
	eventually(t, 20*time.Second, "every run command received", func() bool { return len(a.commandSeqs()) == 3 })
	seqs := a.commandSeqs()
	a.sendHeartbeat(protocol.Heartbeat{Cursor: seqs[2]})
	eventually(t, 10*time.Second, "a's cursor stored", func() bool { return storedCursor(c, a.id) == seqs[2] })
	p := newCommandPruner(c.core)
	for range 5 {
		if n, err := p.pass(ctx); err != nil || n != 0 {
			t.Fatalf("pass = %d, %v; want nothing pruned within the lag", n, err)
		}
	}
	if got := commandsHeld(t, js, a.id); got != 3 {
		t.Fatalf("AX_CMD holds %d commands of %s, want all 3 (within the lag)", got, a.id)
	}
}

// TestCommandPruneSamples: the sequence bound is the last sample at or
// before the time asked; a wall clock that steps back drops the samples
// taken after it.
func TestCommandPruneSamples(t *testing.T) {
	p := &commandPruner{}
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	if _, ok := p.seqAt(t0); ok {
		t.Fatal("a bound without samples")
	}
	for i := range 3 {
		p.sample(t0.Add(time.Duration(i)*time.Minute), uint64(100*(i+1)))
	}
	for _, tc := range []struct {
		at   time.Duration
		want uint64
		ok   bool
	}{{-time.Second, 0, false}, {0, 100, true}, {90 * time.Second, 200, true}, {time.Hour, 300, true}} {
		got, ok := p.seqAt(t0.Add(tc.at))
		if got != tc.want || ok != tc.ok {
			t.Errorf("seqAt(t0%+v) = %d, %v; want %d, %v", tc.at, got, ok, tc.want, tc.ok)
		}
	}
	p.sample(t0.Add(30*time.Second), 400) // stepped back
	if got, ok := p.seqAt(t0.Add(time.Hour)); got != 400 || !ok || len(p.samples) != 1 {
		t.Errorf("after a step back: seqAt = %d, %v with %d samples; want 400, true, 1", got, ok, len(p.samples))
	}
	for i := range cmdSeqSamplesMax + 10 {
		p.sample(t0.Add(time.Duration(i+1)*time.Hour), uint64(i))
	}
	if len(p.samples) != cmdSeqSamplesMax {
		t.Errorf("%d samples kept, want at most %d", len(p.samples), cmdSeqSamplesMax)
	}
}

// BenchmarkCommandPrunePass10k: one pass of the pruner over 10,000 agents
// whose cursors all moved, each purge removing one command and keeping
// the agent's last (go test -run '^$' -bench CommandPrunePass10k
// -benchtime 3x ./controller/). Between passes, untimed: two more
// commands per agent and the agents' records with their new cursors. The
// lag bound is given as a sample (the pass's cost, not its wait).
func BenchmarkCommandPrunePass10k(b *testing.B) {
	const agents = 10_000
	c := startController(b, pruneTestConfig(b))
	_, js := natstest.JetStream(b, c.NATSURL())
	ctx := tctx(b)
	infos := onlineAgents("edge", agents, c.now())
	putAgents(b, c, infos)
	st, err := js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		b.Fatal(err)
	}
	p := newCommandPruner(c.core)
	cmd := []byte(`{"v":2}`) // never read: the pruner reads sequences only
	wait := func() {
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			b.Fatal("publishes did not complete")
		}
	}
	pruned := 0
	for b.Loop() {
		b.StopTimer()
		first := make([]uint64, agents) // the first of each agent's two new commands
		futs := make([]jetstream.PubAckFuture, agents)
		for round := range 2 {
			for i, a := range infos {
				f, err := js.PublishAsync(protocol.CommandSubject(a.Agent), cmd)
				if err != nil {
					b.Fatal(err)
				}
				if round == 0 {
					futs[i] = f
				}
			}
			wait()
		}
		for i, f := range futs {
			select {
			case ack := <-f.Ok():
				first[i] = ack.Sequence
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
		for i := range infos {
			infos[i].Cursor = first[i] + 1 // applied both: the first is removed, the second (last) stays
			data, err := json.Marshal(infos[i])
			if err != nil {
				b.Fatal(err)
			}
			if _, err := js.PublishAsync(streams.KVSubject(protocol.BucketAgents, infos[i].Agent), data); err != nil {
				b.Fatal(err)
			}
		}
		wait()
		eventually(b, 60*time.Second, "every cursor stored", func() bool {
			n := 0
			c.fleet.Registry().StoredCursors(func(a string, cur uint64) {
				var i int
				if _, err := fmt.Sscanf(a, "edge-%05d", &i); err == nil && cur == infos[i].Cursor {
					n++
				}
			})
			return n == agents
		})
		info, err := st.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		p.samples = append(p.samples[:0], cmdSeqSample{seq: info.State.LastSeq}) // the zero time: before any lag
		b.StartTimer()
		n, err := p.pass(ctx)
		if err != nil {
			b.Fatal(err)
		}
		pruned += n
	}
	b.ReportMetric(float64(pruned)/float64(b.N), "agents_pruned/pass")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(pruned), "µs/agent")
}
