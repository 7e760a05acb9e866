package histindex

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// TestAttentionReturnsWhatAReloadReadsWhole: of live rows in every state,
// Attention returns those TRIGGERED, RUNNING or RETRY_WAITING, those
// PENDING without an agent and those PENDING on an agent scheduled at or
// before due; not the PENDING ones due later, nor ended or no longer live
// ones. Past the limit it answers false.
func TestAttentionReturnsWhatAReloadReadsWhole(t *testing.T) {
	ctx := context.Background()
	idx, err := Open(ctx, filepath.Join(t.TempDir(), "history.db"), 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = idx.Close() })
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	type row struct {
		state protocol.State
		agent string
		in    time.Duration // scheduled_at − now
		gone  bool
		want  bool
	}
	rows := []row{
		{state: protocol.StatePending, agent: "edge-1", in: 30 * time.Minute},
		{state: protocol.StatePending, agent: "edge-1", in: 2 * time.Minute},
		{state: protocol.StatePending, agent: "edge-1", in: time.Minute, want: true}, // due at due
		{state: protocol.StatePending, agent: "edge-1", in: -time.Hour, want: true},
		{state: protocol.StatePending, agent: "", in: time.Hour, want: true},
		{state: protocol.StateTriggered, agent: "edge-1", in: -time.Second, want: true},
		{state: protocol.StateRunning, agent: "edge-1", in: -time.Second, want: true},
		{state: protocol.StateRetryWaiting, agent: "edge-1", in: -time.Minute, want: true},
		{state: protocol.StateSuccess, agent: "edge-1", in: -time.Minute},
		{state: protocol.StateFailed, agent: "edge-1", in: -time.Minute},
		{state: protocol.StateCancelled, agent: "", in: -time.Minute},
		{state: protocol.StateRetryWaiting, agent: "edge-1", in: -time.Minute, gone: true},
	}
	var items []Item
	var want, gone []string
	for i, r := range rows {
		job := protocol.NewJobID("at", now, uint32(i))
		at := now.Add(r.in)
		e := protocol.Execution{ExecID: protocol.ExecID(job, at), JobID: job, Attempt: 1, State: r.state,
			Agent: r.agent, ScheduledAt: at, UpdatedAt: now.Add(-time.Hour)}
		items = append(items, Item{Exec: &e})
		if r.want {
			want = append(want, e.ExecID)
		}
		if r.gone {
			gone = append(gone, e.ExecID)
		}
	}
	if err := idx.Apply(ctx, items, 1); err != nil {
		t.Fatal(err)
	}
	if err := idx.MarkGone(ctx, gone); err != nil {
		t.Fatal(err)
	}
	got, ok, err := idx.Attention(ctx, now.Add(time.Minute), 100)
	if err != nil || !ok {
		t.Fatalf("Attention: %v, %v", ok, err)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Attention = %v\nwant %v", got, want)
	}
	if _, ok, err := idx.Attention(ctx, now.Add(time.Minute), len(want)-1); err != nil || ok {
		t.Fatalf("Attention with limit %d of %d rows: ok %v, %v; want false", len(want)-1, len(want), ok, err)
	}
	if got, ok, err := idx.Attention(ctx, now.Add(time.Minute), len(want)); err != nil || !ok || len(got) != len(want) {
		t.Fatalf("Attention with limit %d: %d rows, ok %v, %v", len(want), len(got), ok, err)
	}
}
