package kvfollow_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/kvfollow"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
)

// seen is a cache that keeps the highest revision of each key, as Follow
// asks of apply when several workers apply the first pass.
type seen struct {
	mu  sync.Mutex
	rev map[string]uint64
	del map[string]bool
}

func (s *seen) apply(e jetstream.KeyValueEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Revision() <= s.rev[e.Key()] {
		return
	}
	s.rev[e.Key()] = e.Revision()
	s.del[e.Key()] = e.Operation() != jetstream.KeyValuePut
}

func (s *seen) get(k string) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev[k], s.del[k]
}

// TestFollowAppliesFirstPassThenChanges: the values present when the
// watcher was made are all applied when Follow returns (with one worker
// and with four), and a later put and delete reach apply on the goroutine
// started with goRun, which ends with its context.
func TestFollowAppliesFirstPassThenChanges(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.JetStream(t, srv.URL())
	ctx := testutil.Context(t, 30*time.Second)
	for _, workers := range []int{1, 4} {
		kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: fmt.Sprintf("follow%d", workers)})
		if err != nil {
			t.Fatal(err)
		}
		const n = 500
		for i := range n {
			if _, err := kv.Put(ctx, fmt.Sprintf("k%d", i), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
		w, err := kv.WatchAll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := &seen{rev: map[string]uint64{}, del: map[string]bool{}}
		runCtx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		goRun := func(fn func(context.Context)) { wg.Add(1); go func() { defer wg.Done(); fn(runCtx) }() }
		if err := kvfollow.Follow(ctx, w, s.apply, workers, goRun); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if rev, _ := s.get(fmt.Sprintf("k%d", i)); rev != uint64(i+1) {
				t.Fatalf("workers %d: k%d at revision %d when Follow returned, want %d", workers, i, rev, i+1)
			}
		}
		rev, err := kv.Put(ctx, "k0", []byte("w"))
		if err != nil {
			t.Fatal(err)
		}
		if err := kv.Delete(ctx, "k1"); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, 10*time.Second, "the put and the delete applied", func() bool {
			r0, _ := s.get("k0")
			_, d1 := s.get("k1")
			return r0 == rev && d1
		})
		stop()
		wg.Wait() // the follower ends with its context
	}
}
