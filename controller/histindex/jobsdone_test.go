package histindex

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// TestJobsDone: a job is done when the index holds executions of it and
// every one is terminal and gone from live state; one execution still
// live, one not terminal, or none at all keeps it out. A job whose id
// starts with another's id and "-" is told apart from it, and the ids are
// asked in more than one query (jobsDoneChunk).
func TestJobsDone(t *testing.T) {
	ctx := context.Background()
	idx := openTestIndex(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var items []Item
	var gone []string
	add := func(job string, i int, state protocol.State, left bool) {
		at := t0.Add(time.Duration(i) * time.Minute)
		e := &protocol.Execution{ExecID: protocol.ExecID(job, at), JobID: job, Attempt: 1, State: state,
			Agent: "edge-1", ScheduledAt: at, UpdatedAt: at.Add(time.Second)}
		items = append(items, Item{Exec: e})
		if left {
			gone = append(gone, e.ExecID)
		}
	}
	id := func(name string) string { return protocol.NewJobID(name, t0, 7) }
	done, live, running, none := id("done"), id("live"), id("running"), id("none")
	// A job whose id is done's id, "-" and more (a node name may hold '-'),
	// with an execution still live: done stays done, this one is not.
	prefixed := protocol.NewJobID(strings.TrimPrefix(done, "ax-"), t0, 7)
	if !strings.HasPrefix(prefixed, done+"-") {
		t.Fatalf("%s does not start with %s-", prefixed, done)
	}
	add(done, 0, protocol.StateSuccess, true)
	add(done, 1, protocol.StateFailed, true)
	add(live, 0, protocol.StateSuccess, true)
	add(live, 1, protocol.StateSuccess, false)
	add(running, 0, protocol.StateSuccess, true)
	add(running, 1, protocol.StateRunning, false)
	add(prefixed, 0, protocol.StateSuccess, false)
	// Enough other done jobs for three queries.
	var many []string
	for i := range 2*jobsDoneChunk + 3 {
		j := protocol.NewJobID(fmt.Sprintf("many%d", i), t0, 7)
		many = append(many, j)
		add(j, 0, protocol.StateSuccess, true)
	}
	if err := idx.Apply(ctx, items, 1); err != nil {
		t.Fatal(err)
	}
	if err := idx.MarkGone(ctx, gone); err != nil {
		t.Fatal(err)
	}
	asked := append([]string{done, live, running, none, prefixed}, many...)
	got, err := idx.JobsDone(ctx, asked)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{done: true}
	for _, j := range many {
		want[j] = true
	}
	for _, j := range asked {
		if got[j] != want[j] {
			t.Errorf("job %s: done %v, want %v", j, got[j], want[j])
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d jobs done, want %d", len(got), len(want))
	}
	if got, err := idx.JobsDone(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("no ids: %v, %v", got, err)
	}
}
