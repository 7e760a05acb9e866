package fleet

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/pkg/protocol"
)

// digestEnv is a replica whose agents heartbeat every 200 ms and count
// as offline after 600 ms: livenessRefresh 300 ms, a digest every 150 ms.
func digestEnv(node string) Env {
	e := testEnv(node)
	e.Config.HeartbeatInterval = 200 * time.Millisecond
	e.Config.AgentOfflineAfter = 3 * e.Config.HeartbeatInterval
	return e
}

// Two replicas answer one agent's heartbeats (queue group) from memory:
// ax_agents is not written again, yet each replica keeps seeing the
// heartbeats the other answered (the other's liveness digest), so the
// agent stays online on both, with the last-seen time of its latest
// heartbeat.
func TestDigestCarriesLivenessToTheOtherReplica(t *testing.T) {
	srv := natstest.Start(t)
	a := startFleet(t, srv.URL(), digestEnv("ctl-a"))
	b := startFleet(t, srv.URL(), digestEnv("ctl-b"))
	ag := newTestAgent(t, a.url, "edge-1", nil).start()
	ctx := tctx(t)
	revision := func() uint64 {
		e, err := a.kv.Agents.Get(ctx, "edge-1")
		if err != nil {
			t.Fatal(err)
		}
		return e.Revision()
	}
	// Either replica may have answered the registration (queue group) and
	// either may answer the first heartbeat: both must know the
	// registration by then.
	for _, f := range []*testFleet{a, b} {
		eventually(t, 10*time.Second, f.cfg.Node+" knows edge-1 registered", func() bool {
			info, ok := f.agents.Get("edge-1")
			return ok && Registered(info) && !info.Revoked
		})
	}
	if r := ag.heartbeat(); r.Error != "" {
		t.Fatal(r.Error)
	}
	eventually(t, 10*time.Second, "the first heartbeat written", func() bool {
		return !storedAgent(t, ctx, a, "edge-1").HeartbeatAt.IsZero()
	})
	// Both replicas' caches hold that write before the next heartbeats:
	// a replica that had not seen it yet would write the first heartbeat
	// again.
	for _, f := range []*testFleet{a, b} {
		eventually(t, 10*time.Second, f.cfg.Node+" has the first heartbeat's record", func() bool {
			info, ok := f.agents.Get("edge-1")
			return ok && !info.HeartbeatAt.IsZero()
		})
	}
	rev := revision()

	// Heartbeats for several offline periods, each answered by either.
	start := time.Now()
	var last time.Time
	for time.Since(start) < 4*a.cfg.AgentOfflineAfter {
		if r := ag.heartbeat(); r.Error != "" {
			t.Fatal(r.Error)
		}
		for _, c := range []*testFleet{a, b} {
			if info, _ := c.agents.Get("edge-1"); info.LastSeen.After(last) {
				last = info.LastSeen
			}
		}
	}
	for _, c := range []*testFleet{a, b} {
		eventually(t, 10*time.Second, c.cfg.Node+" sees the latest heartbeat", func() bool {
			info, _ := c.agents.Get("edge-1")
			return !info.LastSeen.Before(last) && IsOnline(info, c.now(), c.cfg.AgentOfflineAfter)
		})
	}
	if got := revision(); got != rev {
		t.Fatalf("ax_agents revision %d after heartbeats that changed nothing but liveness, want %d (not written)", got, rev)
	}
}

// A controller restarted after it answered an agent's heartbeats reads
// the agent's liveness from its previous process's digest, not from
// ax_agents (whose last-seen time is older), and writes its own digest
// over it (the keys are the node's, not the process's).
func TestRestartedReplicaReadsLivenessFromDigests(t *testing.T) {
	srv := natstest.Start(t)
	a := startFleet(t, srv.URL(), digestEnv("ctl-a"))
	ag := newTestAgent(t, a.url, "edge-1", nil).start()
	ctx := tctx(t)
	ag.heartbeat()
	eventually(t, 10*time.Second, "the first heartbeat written", func() bool {
		return !storedAgent(t, ctx, a, "edge-1").HeartbeatAt.IsZero()
	})
	stored := storedAgent(t, ctx, a, "edge-1").LastSeen
	// Heartbeats until the one in memory is an offline period past the
	// stored one, and a digest has it.
	var last time.Time
	eventually(t, 10*time.Second, "a digest of a later heartbeat", func() bool {
		ag.heartbeat()
		info, _ := a.agents.Get("edge-1")
		last = info.LastSeen
		if last.Sub(stored) <= a.cfg.AgentOfflineAfter {
			return false
		}
		d := a.agents.digests(a.instance, a.now(), a.cfg.AgentOfflineAfter)
		if err := a.store.writeDigest(context.Background()); err != nil {
			t.Fatal(err)
		}
		return d[digestChunk("edge-1")].Agents["edge-1"].LastSeen.Equal(last)
	})
	a.close()
	_, js := natstest.JetStream(t, srv.URL())
	liveness, err := js.KeyValue(ctx, protocol.BucketLiveness)
	if err != nil {
		t.Fatal(err)
	}
	keys := func() []string {
		ks, err := liveness.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for k := range ks.Keys() {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	before := keys()
	b := startFleet(t, srv.URL(), digestEnv("ctl-a"))
	info, ok := b.agents.Get("edge-1")
	if !ok {
		t.Fatal("the restarted controller does not know edge-1")
	}
	if !info.LastSeen.Equal(last) {
		t.Fatalf("restarted: edge-1 last seen %s, want %s (the digest's; ax_agents has %s)", info.LastSeen, last, stored)
	}
	ag.heartbeat()
	if err := b.store.writeDigest(ctx); err != nil {
		t.Fatal(err)
	}
	if after := keys(); !slices.Equal(after, before) {
		t.Fatalf("keys of ax_liveness %v after the restart's digest, want %v", after, before)
	}
}

// A digest never revives a record it does not belong to: an entry of an
// earlier boot, of a revoked agent, or older than what is known is not
// applied, and one from before the agent said it was stopping keeps it
// stopped.
func TestDigestEntryApplied(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	base := protocol.AgentInfo{Agent: "edge-1", Boot: "b2", LastSeen: t0, RegisteredAt: t0.Add(-time.Hour)}
	cases := []struct {
		name  string
		rec   func(*protocol.AgentInfo)
		entry digestEntry
		want  bool
	}{
		{"later, same boot", nil, digestEntry{Boot: "b2", LastSeen: t0.Add(time.Second)}, true},
		{"earlier boot", nil, digestEntry{Boot: "b1", LastSeen: t0.Add(time.Second)}, false},
		{"not later", nil, digestEntry{Boot: "b2", LastSeen: t0}, false},
		{"revoked", func(a *protocol.AgentInfo) { a.Revoked = true }, digestEntry{Boot: "b2", LastSeen: t0.Add(time.Second)}, false},
		{"before the stop", func(a *protocol.AgentInfo) { a.StoppedAt = t0.Add(2 * time.Second) },
			digestEntry{Boot: "b2", LastSeen: t0.Add(time.Second)}, false},
		{"after the stop", func(a *protocol.AgentInfo) { a.StoppedAt = t0 }, digestEntry{Boot: "b2", LastSeen: t0.Add(time.Second)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRegistry()
			rec := base
			if tc.rec != nil {
				tc.rec(&rec)
			}
			r.putRev(rec, 1)
			if got := r.seenElsewhere("edge-1", tc.entry); got != tc.want {
				t.Fatalf("applied = %v, want %v", got, tc.want)
			}
			info, _ := r.Get("edge-1")
			want := rec.LastSeen
			if tc.want {
				want = tc.entry.LastSeen
			}
			if !info.LastSeen.Equal(want) {
				t.Fatalf("last seen %s, want %s", info.LastSeen, want)
			}
			if tc.want && !info.StoppedAt.IsZero() {
				t.Fatalf("stopped at %s after a later heartbeat", info.StoppedAt)
			}
		})
	}
	if newRegistry().seenElsewhere("nobody", digestEntry{LastSeen: t0}) {
		t.Fatal("an entry for an unknown agent was applied")
	}
}

// FuzzDecodeDigest: any bytes in ax_liveness decode to a checked digest
// or to errBadDigest, never to an entry without an agent id or a time.
func FuzzDecodeDigest(f *testing.F) {
	f.Add([]byte(`{"v":1,"agents":{"edge-1":{"b":"x","s":"2026-12-01T12:00:00Z","h":"2026-12-01T12:00:00Z","t":{"pending":1}}}}`))
	f.Add([]byte(`{"v":1,"agents":{"../x":{"s":"2026-12-01T12:00:00Z"}}}`))
	f.Add([]byte(`{"v":2,"agents":{}}`))
	f.Add([]byte(`{"v":1,"agents":{"edge-1":{}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := decodeDigest(data)
		if err != nil {
			if !errors.Is(err, errBadDigest) {
				t.Fatalf("error %v is not errBadDigest", err)
			}
			return
		}
		for id, e := range d.Agents {
			if protocol.ValidateName("agent", id) != nil || e.LastSeen.IsZero() {
				t.Fatalf("accepted entry %q: %+v", id, e)
			}
		}
	})
}
