package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestOpenMigratesAndReopens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	s := open(t, path)
	ctx := context.Background()
	if err := s.Do(ctx, func(tx *Tx) error { return tx.SetMeta(MetaCursor, "42") }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, path)
	v, ok, err := s2.Meta(ctx, MetaCursor)
	if err != nil || !ok || v != "42" {
		t.Fatalf("cursor after reopen = %q %v %v", v, ok, err)
	}
	var ver int
	if err := s2.rdb.QueryRow("PRAGMA user_version").Scan(&ver); err != nil || ver != SchemaVersion() {
		t.Fatalf("user_version = %d (%v), want %d", ver, err, SchemaVersion())
	}
	var mode string
	if err := s2.rdb.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q (%v)", mode, err)
	}
}

func TestOpenRefusesBadFiles(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T) string
		want  []error
	}{
		{"garbage file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "agent.db")
			if err := os.WriteFile(p, []byte("this is not a sqlite database, just some garbage text......................................................................................"), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, []error{ErrCorrupt}},
		{"truncated file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "agent.db")
			if err := os.WriteFile(p, []byte("SQLite format 3\x00"), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, []error{ErrCorrupt}},
		{"corrupted pages", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "agent.db")
			s, err := Open(context.Background(), p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 200 {
				if err := s.Do(context.Background(), func(tx *Tx) error {
					return tx.Enqueue(fmt.Sprintf("m%d", i), "s", make([]byte, 500))
				}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.wdb.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
				t.Fatal(err)
			}
			_ = s.Close()
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for i := 4096; i < len(b); i++ {
				b[i] ^= 0x5a
			}
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, []error{ErrCorrupt}},
		{"missing directory", func(t *testing.T) string {
			return filepath.Join(t.TempDir(), "nope", "agent.db")
		}, []error{ErrCantOpen}},
		{"directory is a file", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(p, "agent.db")
		}, []error{ErrCantOpen}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.setup(t)
			s, err := Open(context.Background(), p, Options{})
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open succeeded, want %v", tc.want)
			}
			matched := false
			for _, w := range tc.want {
				matched = matched || errors.Is(err, w)
			}
			if !matched {
				t.Fatalf("Open error = %v, want one of %v", err, tc.want)
			}
		})
	}
}

// TestOpenReadOnly makes the file and its directory unwritable. As root,
// permission bits are ignored, so the test uses a read-only bind mount when
// it can (root) and chmod otherwise.
func TestOpenReadOnly(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.db")
	s := open(t, p)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	roDir := readOnlyView(t, dir)
	_, err := Open(context.Background(), filepath.Join(roDir, "agent.db"), Options{})
	if !errors.Is(err, ErrReadOnly) && !errors.Is(err, ErrCantOpen) {
		t.Fatalf("Open on read-only dir = %v, want ErrReadOnly or ErrCantOpen", err)
	}
	_, err = Open(context.Background(), filepath.Join(roDir, "new.db"), Options{})
	if !errors.Is(err, ErrReadOnly) && !errors.Is(err, ErrCantOpen) {
		t.Fatalf("Open of a new file in read-only dir = %v, want ErrReadOnly or ErrCantOpen", err)
	}
}

func TestGroupCommitConcurrent(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agent.db"))
	ctx := context.Background()
	const n = 2000
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.Do(ctx, func(tx *Tx) error {
				return tx.Enqueue(fmt.Sprintf("id-%d", i), "subj", []byte("x"))
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := s.Counts(ctx)
	if err != nil || c.Outbox != n {
		t.Fatalf("outbox = %d (%v), want %d", c.Outbox, err, n)
	}
}

func TestFailingFunctionRollsBackOnlyItself(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agent.db"))
	ctx := context.Background()
	boom := errors.New("boom")
	var wg sync.WaitGroup
	results := make([]error, 50)
	for i := range 50 {
		wg.Add(1)
		s.Submit(func(tx *Tx) error {
			if err := tx.Enqueue(fmt.Sprintf("m%d", i), "s", []byte("x")); err != nil {
				return err
			}
			if i%5 == 0 {
				return boom
			}
			return nil
		}, func(err error) { results[i] = err; wg.Done() })
	}
	wg.Wait()
	for i, err := range results {
		if (i%5 == 0) != errors.Is(err, boom) {
			t.Fatalf("result %d = %v", i, err)
		}
	}
	msgs, err := s.Outbox(ctx, 0, 100)
	if err != nil || len(msgs) != 40 {
		t.Fatalf("outbox has %d (%v), want 40", len(msgs), err)
	}
}

func TestExecLifecycle(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agent.db"))
	ctx := context.Background()
	now := time.Now().UTC()
	var ref, id int64
	err := s.Do(ctx, func(tx *Tx) error {
		var err error
		ref, _, _, err = tx.PutJob(Job{ID: "ax-n-20260101000000-aaaaaa", Generation: 2, Spec: []byte(`{"a":1}`), ShardIndex: -1})
		if err != nil {
			return err
		}
		id, _, err = tx.InsertExec(Exec{ExecID: "ax-n-20260101000000-aaaaaa-1", Attempt: 1, JobID: "ax-n-20260101000000-aaaaaa",
			State: StateTriggered, ScheduledAt: now, RunAt: now, TriggeredAt: now, ShardIndex: -1})
		return err
	})
	if err != nil || ref == 0 || id == 0 {
		t.Fatalf("insert: ref=%d id=%d err=%v", ref, id, err)
	}
	// Same attempt again: ignored. Older generation: ignored.
	err = s.Do(ctx, func(tx *Tx) error {
		_, ins, err := tx.InsertExec(Exec{ExecID: "ax-n-20260101000000-aaaaaa-1", Attempt: 1, JobID: "ax-n-20260101000000-aaaaaa",
			State: StateTriggered, ScheduledAt: now, RunAt: now})
		if err != nil || ins {
			return fmt.Errorf("duplicate insert: inserted=%v err=%v", ins, err)
		}
		_, _, w, err := tx.PutJob(Job{ID: "ax-n-20260101000000-aaaaaa", Generation: 1, Spec: []byte(`{"a":0}`)})
		if err != nil || w {
			return fmt.Errorf("older generation: written=%v err=%v", w, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Unassign keeps the spec for the live execution.
	if err := s.Do(ctx, func(tx *Tx) error { _, err := tx.DeleteJob("ax-n-20260101000000-aaaaaa", 0, now); return err }); err != nil {
		t.Fatal(err)
	}
	e, err := s.Exec(ctx, id)
	if err != nil || string(e.Spec) != `{"a":1}` || e.State != StateTriggered {
		t.Fatalf("exec = %+v, %v", e, err)
	}
	err = s.Do(ctx, func(tx *Tx) error {
		if moved, err := tx.MarkRunningAll([]int64{id, id + 100}, now); !moved[id] || len(moved) != 1 || err != nil {
			return fmt.Errorf("running: moved %v, %v", moved, err)
		}
		if ok, err := tx.Finish(id, StateFinished, now, "success", []byte(`{}`)); !ok || err != nil {
			return fmt.Errorf("finish: %v %v", ok, err)
		}
		if ok, err := tx.Finish(id, StateInterrupted, now, "interrupted", nil); ok || err != nil {
			return fmt.Errorf("second finish changed a final row: %v %v", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestConnectionCaches(t *testing.T) {
	tests := []struct {
		name                       string
		opts                       Options
		wantWrite, wantRead, wantN int
	}{
		{"defaults", Options{}, DefaultCacheKiB, DefaultReadCacheKiB, DefaultReaders},
		{"set", Options{CacheKiB: 512, ReadCacheKiB: 64, Readers: 2}, 512, 64, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(context.Background(), filepath.Join(t.TempDir(), "agent.db"), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			var w, r int
			if err := s.wdb.QueryRow("PRAGMA cache_size").Scan(&w); err != nil || w != -tt.wantWrite {
				t.Errorf("write cache_size = %d (%v), want %d", w, err, -tt.wantWrite)
			}
			if err := s.rdb.QueryRow("PRAGMA cache_size").Scan(&r); err != nil || r != -tt.wantRead {
				t.Errorf("read cache_size = %d (%v), want %d", r, err, -tt.wantRead)
			}
			if n := s.rdb.Stats().MaxOpenConnections; n != tt.wantN {
				t.Errorf("read connections = %d, want %d", n, tt.wantN)
			}
		})
	}
}

// TestMigrateKeepsRowsAndMarksPeriodic: a file of schema 1 (before
// execs.periodic) opens migrated; its attempts read as runs (not periodic
// fires); new attempts keep their mark; LiveByJob counts live attempts per
// job in one read.
func TestMigrateKeepsRowsAndMarksPeriodic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	writeDB(t, path, migrations[0], "PRAGMA user_version = 1",
		`INSERT INTO execs(exec_id, attempt, job_id, state, scheduled_at, run_at) VALUES ('old-1', 1, 'j', 'TRIGGERED', 1, 1)`)
	s := open(t, path)
	ctx := context.Background()
	now := time.Now().UTC()
	err := s.Do(ctx, func(tx *Tx) error {
		for i, st := range []string{StateTriggered, StateRunning, StateSkipped} {
			if _, _, err := tx.InsertExec(Exec{ExecID: fmt.Sprintf("new-%d", i), Attempt: 1, JobID: "j", State: st, Periodic: true,
				ScheduledAt: now, RunAt: now, ShardIndex: -1}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	old, err := s.ExecByID(ctx, "old-1", 1)
	if err != nil || old.Periodic {
		t.Fatalf("row of schema 1: %+v, %v; want a run (not periodic)", old, err)
	}
	fresh, err := s.ExecByID(ctx, "new-0", 1)
	if err != nil || !fresh.Periodic {
		t.Fatalf("new periodic row: %+v, %v", fresh, err)
	}
	live, err := s.LiveByJob(ctx)
	if err != nil || len(live) != 1 || live["j"] != (Live{Triggered: 2, Running: 1}) {
		t.Fatalf("LiveByJob = %v, %v; want j: 2 triggered, 1 running", live, err)
	}
}
