package histindex

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
)

// TestHistoryIndexListMatchesFilter: on a real SQLite file with 8,000
// executions, every page the index lists (random filters, narrow and
// wide scheduled ranges, paging) is exactly what filtering and sorting
// all of them gives; a stale snapshot (older updated_at) applied after a
// newer one changes nothing, also within one batch; the cursor is the one
// stored with the last batch.
func TestHistoryIndexListMatchesFilter(t *testing.T) {
	ctx := context.Background()
	idx := openTestIndex(t)
	rnd := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var jobs []string
	for i := range 20 {
		jobs = append(jobs, protocol.NewJobID("idx", t0.Add(time.Duration(i)*time.Second), rnd.Uint32()))
	}
	// A job whose id starts with another's id and "-" (a node name may
	// hold '-'): a job's executions are found by exec id prefix, and the
	// other's must not be listed with them.
	jobs = append(jobs, protocol.NewJobID(strings.TrimPrefix(jobs[0], "ax-"), t0, rnd.Uint32()))
	if !strings.HasPrefix(jobs[len(jobs)-1], jobs[0]+"-") {
		t.Fatalf("%s does not start with %s-", jobs[len(jobs)-1], jobs[0])
	}
	states := []protocol.State{protocol.StatePending, protocol.StateRunning, protocol.StateSuccess, protocol.StateFailed}
	var all []protocol.Execution
	var items []Item
	seen := map[string]bool{}
	for len(all) < 8000 {
		job := jobs[rnd.IntN(len(jobs))]
		at := t0.Add(time.Duration(rnd.IntN(24*3600)) * time.Second)
		id := protocol.ExecID(job, at)
		if seen[id] {
			continue
		}
		seen[id] = true
		e := protocol.Execution{ExecID: id, JobID: job, Attempt: 1, State: states[rnd.IntN(len(states))],
			Agent: "a-" + string(rune('0'+rnd.IntN(4))), ScheduledAt: at, UpdatedAt: at.Add(time.Minute)}
		all = append(all, e)
		items = append(items, Item{Exec: &e})
	}
	if err := idx.Apply(ctx, items, 1); err != nil {
		t.Fatal(err)
	}
	// A stale snapshot of the first one changes nothing.
	stale := all[0]
	stale.State, stale.UpdatedAt = protocol.StateTriggered, stale.UpdatedAt.Add(-time.Second)
	if err := idx.Apply(ctx, []Item{{Exec: &stale}}, 2); err != nil {
		t.Fatal(err)
	}
	if e, ok, _ := idx.Get(ctx, all[0].ExecID); !ok || e.State != all[0].State {
		t.Fatalf("stale snapshot applied: %+v", e)
	}
	// In one batch the newest snapshot wins, whatever the order.
	newer, older := all[1], all[1]
	newer.State, newer.UpdatedAt = protocol.StateFailed, newer.UpdatedAt.Add(time.Hour)
	older.State, older.UpdatedAt = protocol.StateRunning, older.UpdatedAt.Add(time.Minute)
	if err := idx.Apply(ctx, []Item{{Exec: &newer}, {Exec: &older}}, 3); err != nil {
		t.Fatal(err)
	}
	if e, _, _ := idx.Get(ctx, newer.ExecID); e.State != protocol.StateFailed {
		t.Fatalf("batch applied the older snapshot: %+v", e)
	}
	all[1] = newer
	if seq, _ := idx.Cursor(ctx); seq != 3 {
		t.Fatalf("cursor %d, want 3 (stored with the last batch)", seq)
	}
	slices.SortFunc(all, func(a, b protocol.Execution) int { return strings.Compare(a.ExecID, b.ExecID) })
	for i := range 300 {
		var f Filter
		if rnd.IntN(3) == 0 {
			f.JobID = jobs[rnd.IntN(len(jobs))]
		}
		if rnd.IntN(3) == 0 {
			f.Agent = "a-" + string(rune('0'+rnd.IntN(4)))
		}
		if rnd.IntN(3) == 0 {
			f.State = states[rnd.IntN(len(states))]
		}
		if rnd.IntN(2) == 0 {
			f.From = t0.Add(time.Duration(rnd.IntN(24*3600)) * time.Second)
			span := time.Duration(rnd.IntN(60)) * time.Second // narrow
			if rnd.IntN(2) == 0 {
				span = time.Duration(rnd.IntN(24)) * time.Hour // wide
			}
			if rnd.IntN(4) > 0 {
				f.To = f.From.Add(span + time.Second)
			}
		}
		if rnd.IntN(2) == 0 {
			f.After = all[rnd.IntN(len(all))].ExecID
		}
		limit := 1 + rnd.IntN(60)
		var want []string
		for _, e := range all {
			if f.After != "" && e.ExecID <= f.After || f.JobID != "" && e.JobID != f.JobID || f.Agent != "" && e.Agent != f.Agent ||
				f.State != "" && e.State != f.State || !f.From.IsZero() && e.ScheduledAt.Before(f.From) || !f.To.IsZero() && !e.ScheduledAt.Before(f.To) {
				continue
			}
			if want = append(want, e.ExecID); len(want) == limit {
				break
			}
		}
		got, err := idx.List(ctx, f, limit)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(protocoltest.ExecIDs(got), want) {
			t.Fatalf("case %d: list(%+v, %d) = %v, want %v", i, f, limit, protocoltest.ExecIDs(got), want)
		}
	}
}

// TestHistoryIndexOtherVersionRebuilt: an index file of another schema
// version (the first one, keyed by exec id) is emptied when opened, its
// cursor back at 0, so the follower rebuilds it from AX_EVT; a file of
// the current version is kept.
func TestHistoryIndexOtherVersionRebuilt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "history.db")
	old, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.ExecContext(ctx, `CREATE TABLE execs (exec_id TEXT PRIMARY KEY, job_id TEXT NOT NULL) WITHOUT ROWID;
		CREATE TABLE cursor (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL);
		INSERT INTO cursor (id, seq) VALUES (1, 42)`); err != nil {
		t.Fatal(err)
	}
	_ = old.Close()
	idx, err := Open(ctx, path, 16)
	if err != nil {
		t.Fatal(err)
	}
	if seq, err := idx.Cursor(ctx); err != nil || seq != 0 || !idx.rebuilt {
		t.Fatalf("after opening a version-0 index: cursor %d, %v, rebuilt %v; want 0, rebuilt", seq, err, idx.rebuilt)
	}
	e := protocol.Execution{ExecID: protocol.ExecID("ax-n-20260101000000-abcdef", time.Unix(1, 0)), JobID: "ax-n-20260101000000-abcdef",
		State: protocol.StateSuccess, UpdatedAt: time.Unix(2, 0)}
	if err := idx.Apply(ctx, []Item{{Exec: &e}}, 7); err != nil {
		t.Fatal(err)
	}
	_ = idx.Close()
	idx, err = Open(ctx, path, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	if seq, _ := idx.Cursor(ctx); seq != 7 || idx.rebuilt {
		t.Fatalf("reopened current index: cursor %d, rebuilt %v; want 7, kept", seq, idx.rebuilt)
	}
	if _, ok, err := idx.Get(ctx, e.ExecID); !ok || err != nil {
		t.Fatalf("reopened current index lost %s: %v, %v", e.ExecID, ok, err)
	}
}
