package execstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// TestStoreCompareAndSet: on a real server's ax_execs, every write is a
// compare-and-set on the revision the caller read: a create over an
// existing key, an update, a pipelined update or a retirement at a stale
// revision is ErrCASConflict and changes nothing; at the current one it
// is stored (a retirement removes the key and leaves its purge marker).
func TestStoreCompareAndSet(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.JetStream(t, srv.URL())
	ctx := testutil.Context(t, 30*time.Second)
	b, err := streams.Ensure(ctx, js, streams.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := execstore.New(b.Execs, js, 5*time.Second)
	now := time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC)
	job := "ax-n-20261202020000-abcdef"
	rec, _, err := execution.Apply(nil, execution.Create{ExecID: protocol.ExecID(job, now), JobID: job, Agent: "edge-1",
		ScheduledAt: now, Reason: "scheduled"}, execution.Env{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	id := rec.ExecID
	if v, err := s.Get(ctx, id); err != nil || v.Rec != nil || v.Rev != 0 {
		t.Fatalf("Get of a missing record: %+v, %v; want none", v, err)
	}
	rev1, err := s.Put(ctx, execstore.Version{}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, execstore.Version{}, rec); !errors.Is(err, execstore.ErrCASConflict) {
		t.Fatalf("second create: %v, want ErrCASConflict", err)
	}
	cur, err := s.Get(ctx, id)
	if err != nil || cur.Rev != rev1 || cur.Rec == nil || cur.Rec.State != protocol.StatePending {
		t.Fatalf("Get after the create: %+v, %v", cur, err)
	}
	next := cur.Rec.Clone()
	next.Reason = "updated"
	rev2, err := s.Put(ctx, cur, next)
	if err != nil {
		t.Fatal(err)
	}
	stale := cur // read at rev1
	if _, err := s.Put(ctx, stale, next); !errors.Is(err, execstore.ErrCASConflict) {
		t.Fatalf("update at a stale revision: %v, want ErrCASConflict", err)
	}
	if _, err := s.PutAsync(stale, next).Wait(ctx); !errors.Is(err, execstore.ErrCASConflict) {
		t.Fatalf("pipelined update at a stale revision: %v, want ErrCASConflict", err)
	}
	rev3, err := s.PutAsync(execstore.Version{Rec: next, Rev: rev2}, next).Wait(ctx)
	if err != nil || rev3 <= rev2 {
		t.Fatalf("pipelined update at the current revision: %d, %v", rev3, err)
	}
	if _, err := s.Retire(ctx, id, rev2); !errors.Is(err, execstore.ErrCASConflict) {
		t.Fatalf("retire at a stale revision: %v, want ErrCASConflict", err)
	}
	if v, _ := s.Get(ctx, id); v.Rev != rev3 {
		t.Fatalf("after the refused writes the record is at %d, want %d", v.Rev, rev3)
	}
	m, err := s.Retire(ctx, id, rev3)
	if err != nil || m == nil || m.Stream != execstore.Stream || m.Seq <= rev3 {
		t.Fatalf("retire at the current revision: %+v, %v", m, err)
	}
	if v, err := s.Get(ctx, id); err != nil || v.Rec != nil {
		t.Fatalf("Get after the retirement: %+v, %v; want none", v, err)
	}
}
