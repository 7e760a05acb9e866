package controller

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// Shard ownership between whole controllers (replicas on one server);
// lease.Ownership alone is tested in controller/lease.

// replicaConfig is a config for a replica named node on an external server.
func replicaConfig(t testing.TB, url, node string, ttl time.Duration) Config {
	cfg := testConfig(t, "")
	cfg.NATS.URL, cfg.Node = url, node
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.LeaseTTL, cfg.LeaseRenewInterval = ttl, ttl/5
	return cfg
}

// TestReplicasSplitShardsAndRefuseAnotherTTL: two replicas on one server
// split the shards evenly; a third with another lease TTL is refused while
// they live (its shorter TTL would judge their agents' leases lapsed too
// early); once they stop, the TTL may change.
func TestReplicasSplitShardsAndRefuseAnotherTTL(t *testing.T) {
	srv := natstest.Start(t)
	a := startController(t, replicaConfig(t, srv.URL(), "ctl-a", 2*time.Second))
	b := startController(t, replicaConfig(t, srv.URL(), "ctl-b", 2*time.Second))
	eventually(t, 10*time.Second, "8 shards each", func() bool {
		n := map[string]int{}
		for _, o := range a.ShardOwners() {
			n[o]++
		}
		return n["ctl-a"] == 8 && n["ctl-b"] == 8 && len(a.own.OwnedShards()) == 8 && len(b.own.OwnedShards()) == 8
	})

	c, err := New(replicaConfig(t, srv.URL(), "ctl-c", 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Start(tctx(t))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "lease_ttl") {
		t.Fatalf("Start with another lease_ttl beside live replicas = %v, want ErrConfig naming lease_ttl", err)
	}

	// A clean stop hands the shards over at once: when Close returns, no
	// shard lease names ctl-b any more (nobody waits for its TTL).
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for n := range a.cfg.Shards {
		e, err := a.kv.Leases.Get(tctx(t), lease.ShardKey(n))
		if err == nil && strings.Contains(string(e.Value()), `"node":"ctl-b"`) {
			t.Fatalf("shard %d still leased to ctl-b after its Close: %s", n, e.Value())
		}
	}
	eventually(t, 20*time.Second, "ctl-a owns all shards", func() bool { return len(a.own.OwnedShards()) == a.cfg.Shards })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	startController(t, replicaConfig(t, srv.URL(), "ctl-c", 3*time.Second))
}

// TestSameNodeNewerProcessWins: two processes running under one node name
// (an overlapping restart, a partition that heals) do not take the shards
// from each other forever: the one started later works them all, the
// older one none, and that stays so.
func TestSameNodeNewerProcessWins(t *testing.T) {
	srv := natstest.Start(t)
	older := startController(t, replicaConfig(t, srv.URL(), "ctl-a", time.Second))
	newer := startController(t, replicaConfig(t, srv.URL(), "ctl-a", time.Second))
	eventually(t, 10*time.Second, "the newer process works every shard", func() bool {
		return len(newer.own.OwnedShards()) == newer.cfg.Shards && len(older.own.OwnedShards()) == 0
	})
	// Over two lease TTLs (many ownership passes), nothing moves back.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); <-tick.C {
		if n, m := len(newer.own.OwnedShards()), len(older.own.OwnedShards()); n != newer.cfg.Shards || m != 0 {
			t.Fatalf("shards moved between two processes of node ctl-a: newer works %d, older %d", n, m)
		}
	}
}

// TestStartReloadKeepsRenewingLeases: the reload of the shards a starting
// replica takes runs while its leases are renewed, so a reload longer than
// the lease TTL (300,000 PENDING one-shots on a loaded machine) does not
// lose every shard it just took. The reload is held up until shard 0's
// lease has been renewed twice, over two lease TTLs; Start then returns
// with every shard still held by this replica.
func TestStartReloadKeepsRenewingLeases(t *testing.T) {
	srv := natstest.Start(t)
	cfg := replicaConfig(t, srv.URL(), "ctl-a", time.Second)
	// The start's log, shown when the test fails (one clean-clone CI run
	// timed out waiting for the first lease; it never failed here).
	logs := &testutil.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("controller log:\n%s", logs.String())
		}
	})
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	release := make(chan struct{})
	var hold, free sync.Once
	unblock := func() { free.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	c.hooks.beforeReload = func(context.Context) { hold.Do(func() { <-release }) }
	started := make(chan error, 1)
	// Start's own deadline outlasts the waits below (tctx's minute would
	// cut a start whose steps are retried under load).
	sctx, scancel := context.WithTimeout(context.Background(), startRetryFor+2*time.Minute)
	t.Cleanup(scancel)
	go func() { started <- c.Start(sctx) }()

	js := clientJS(t, srv.URL())
	var kv jetstream.KeyValue
	var first uint64
	// The steps before the shards are taken (streams, jobs, agents,
	// consumers) take seconds under -race on a loaded machine, and a step
	// whose requests time out is retried for up to startRetryFor; the
	// renewals are counted from the first lease seen. A Start that fails
	// meanwhile ends the wait.
	var startErr error
	startedEarly := false
	eventually(t, startRetryFor+time.Minute, "shard 0's lease taken", func() bool {
		if !startedEarly {
			select {
			case startErr = <-started:
				startedEarly = true
				if startErr != nil {
					return true
				}
			default:
			}
		}
		if kv == nil {
			if kv, err = js.KeyValue(tctx(t), protocol.BucketLeases); err != nil {
				kv = nil
				return false
			}
		}
		e, err := kv.Get(tctx(t), lease.ShardKey(0))
		if err != nil {
			return false
		}
		first = e.Revision()
		return true
	})
	if startErr != nil {
		t.Fatalf("Start failed before shard 0's lease was seen: %v", startErr)
	}
	renewals := 0
	eventually(t, 20*cfg.LeaseTTL, "shard 0's lease renewed twice while the start reload is held up", func() bool {
		e, err := kv.Get(tctx(t), lease.ShardKey(0))
		if err == nil && e.Revision() > first {
			first = e.Revision()
			renewals++
		}
		return renewals >= 2
	})
	unblock()
	if !startedEarly { // else its first pass took no shard, and the loop's reloads were held
		if err := <-started; err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	if n := len(c.own.OwnedShards()); n != cfg.Shards {
		t.Fatalf("%d shards owned after a start reload over two lease TTLs, want %d", n, cfg.Shards)
	}
	for n := range cfg.Shards {
		e, err := kv.Get(tctx(t), lease.ShardKey(n))
		if err != nil || !strings.Contains(string(e.Value()), `"node":"ctl-a"`) {
			t.Fatalf("shard %d lease after the start: %v %v", n, e, err)
		}
	}
}
