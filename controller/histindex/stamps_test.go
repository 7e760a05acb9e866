package histindex

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// stampsIndex opens an index on a real SQLite file holding n executions
// of n jobs (spread over its 16 shards), each with its own updated_at and
// state; it returns the index and the exec ids in order.
func stampsIndex(tb testing.TB, n int) (*Index, []string) {
	tb.Helper()
	ctx := context.Background()
	idx, err := Open(ctx, filepath.Join(tb.TempDir(), "history.db"), 16)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = idx.Close() })
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	states := []protocol.State{protocol.StatePending, protocol.StateRunning, protocol.StateSuccess}
	ids := make([]string, 0, n)
	var items []Item
	for i := range n {
		job := protocol.NewJobID("st", t0, uint32(i))
		at := t0.Add(time.Duration(i) * time.Millisecond)
		e := protocol.Execution{ExecID: protocol.ExecID(job, at), JobID: job, Attempt: 1, State: states[i%len(states)],
			Agent: "edge-1", ScheduledAt: at, UpdatedAt: at.Add(time.Second)}
		ids = append(ids, e.ExecID)
		items = append(items, Item{Exec: &e})
		if len(items) == 1000 || i == n-1 {
			if err := idx.Apply(ctx, items, uint64(i+1)); err != nil {
				tb.Fatal(err)
			}
			items = items[:0]
		}
	}
	return idx, ids
}

// TestStampsOfMatchesStamps: StampsOf gives, for the ids asked (more
// than one query's worth, some unknown, some no longer live), exactly
// the stamps Stamps gives for them over every shard.
func TestStampsOfMatchesStamps(t *testing.T) {
	ctx := context.Background()
	idx, ids := stampsIndex(t, 3000)
	gone := ids[10:20]
	if err := idx.MarkGone(ctx, gone); err != nil {
		t.Fatal(err)
	}
	all := make([]int, 16)
	for i := range all {
		all[i] = i
	}
	every, err := idx.Stamps(ctx, all)
	if err != nil {
		t.Fatal(err)
	}
	if len(every) != len(ids)-len(gone) {
		t.Fatalf("Stamps: %d live rows, want %d", len(every), len(ids)-len(gone))
	}
	var ask []string
	for i := 0; i < len(ids); i += 2 {
		ask = append(ask, ids[i])
	}
	ask = append(ask, "ax-st-unknown-1", "ax-st-unknown-2")
	if len(ask) <= stampsChunk {
		t.Fatalf("%d ids ask for one query only", len(ask))
	}
	got, err := idx.StampsOf(ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Stamp{}
	for _, id := range ask {
		if s, ok := every[id]; ok {
			want[id] = s
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("StampsOf: %d stamps, want %d", len(got), len(want))
	}
	for _, id := range gone {
		if _, ok := got[id]; ok {
			t.Fatalf("StampsOf returned %s, which left live state", id)
		}
	}
	if none, err := idx.StampsOf(ctx, nil); err != nil || len(none) != 0 {
		t.Fatalf("StampsOf(nil) = %v, %v", none, err)
	}
}

// BenchmarkStamps: with 100,000 live rows, reading every one (Stamps)
// against looking up k of them (StampsOf); ns per call.
func BenchmarkStamps(b *testing.B) {
	ctx := context.Background()
	idx, ids := stampsIndex(b, 100_000)
	all := make([]int, 16)
	for i := range all {
		all[i] = i
	}
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			if _, err := idx.Stamps(ctx, all); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, k := range []int{10, 1000, 10_000} {
		b.Run(fmt.Sprintf("of=%d", k), func(b *testing.B) {
			ask := make([]string, 0, k)
			for i := 0; i < k; i++ {
				ask = append(ask, ids[i*len(ids)/k])
			}
			for b.Loop() {
				if _, err := idx.StampsOf(ctx, ask); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
