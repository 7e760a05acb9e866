package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
)

// TestDiskFullFailsStore: a write that finds the database full (SQLite's
// own SQLITE_FULL, produced here with max_page_count on the writer's
// connection) fails with ErrDiskFull and fails the store, so that the
// agent stops (agent.Run watches Failed); later writes are refused with
// the same cause, and the file keeps what was committed before and
// nothing of the batch that did not fit.
func TestDiskFullFailsStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	s := open(t, path)
	ctx := context.Background()
	if err := s.Do(ctx, func(tx *Tx) error { return tx.SetMeta(MetaCursor, "7") }); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.wdb.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Failed():
		t.Fatal("store failed before the write")
	default:
	}

	body := bytes.Repeat([]byte("x"), 4096)
	err := s.Do(ctx, func(tx *Tx) error {
		for i := range 64 {
			if err := tx.Enqueue(fmt.Sprintf("m-%d", i), "ax.rpt.0.edge-1", body); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("write to a full database: err = %v, want ErrDiskFull", err)
	}
	select {
	case <-s.Failed():
	default:
		t.Fatal("store not failed after a disk-full write")
	}
	if !errors.Is(s.Err(), ErrDiskFull) {
		t.Fatalf("Err() = %v, want ErrDiskFull", s.Err())
	}
	if err := s.Do(ctx, func(tx *Tx) error { return tx.SetMeta(MetaCursor, "8") }); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("write after the failure: err = %v, want ErrDiskFull", err)
	}
	_ = s.Close()

	s2 := open(t, path) // a fresh connection: no page limit
	if v, ok, err := s2.Meta(ctx, MetaCursor); err != nil || !ok || v != "7" {
		t.Fatalf("cursor after reopen = %q %v %v, want 7", v, ok, err)
	}
	if rows, err := s2.Outbox(ctx, 0, 100); err != nil || len(rows) != 0 {
		t.Fatalf("outbox after reopen: %d rows (%v), want none of the batch that did not fit", len(rows), err)
	}
}
