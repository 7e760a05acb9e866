package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
)

// openWith opens a store at path with o and closes it at the test's end.
func openWith(t *testing.T, path string, o Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// enqueueRows writes n outbox rows in one write and returns their seqs.
func enqueueRows(t *testing.T, s *Store, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	st0, err := s.Outbox(ctx, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Do(ctx, func(tx *Tx) error {
		for i := range n {
			if err := tx.Enqueue("m"+string(rune('a'+i)), "ax.rpt.0.edge", []byte("{}")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Outbox(ctx, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, m := range rows[len(st0):] {
		seqs = append(seqs, m.Seq)
	}
	if len(seqs) != n {
		t.Fatalf("%d rows written, want %d", len(seqs), n)
	}
	return seqs
}

// outboxLen returns how many rows the outbox table holds.
func outboxLen(t *testing.T, s *Store) int {
	t.Helper()
	rows, err := s.Outbox(context.Background(), 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return len(rows)
}

// TestAckLaterJoinsNextCommit: rows acknowledged with AckLater are left
// out of Counts at once, stay in the table without a commit of their own,
// and are deleted by the next write's commit (one commit for both).
func TestAckLaterJoinsNextCommit(t *testing.T) {
	s := openWith(t, filepath.Join(t.TempDir(), "agent.db"), Options{AckDelay: time.Hour})
	ctx := context.Background()
	seqs := enqueueRows(t, s, 3)
	st0 := s.Stats()
	s.AckLater(seqs[1])
	c, err := s.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Outbox != 1 {
		t.Fatalf("Counts.Outbox = %d after two of three rows were acknowledged, want 1", c.Outbox)
	}
	if n := outboxLen(t, s); n != 3 {
		t.Fatalf("the outbox holds %d rows before any other write, want 3 (no commit of their own)", n)
	}
	if err := s.Do(ctx, func(tx *Tx) error { return tx.SetMeta("k", "v") }); err != nil {
		t.Fatal(err)
	}
	if n := outboxLen(t, s); n != 1 {
		t.Fatalf("the outbox holds %d rows after the next write, want 1", n)
	}
	if d := s.Stats().Commits - st0.Commits; d != 1 {
		t.Fatalf("%d commits for the write and the acknowledged rows, want 1", d)
	}
	// A lower or equal seq changes nothing.
	s.AckLater(seqs[0])
	if c, err := s.Counts(ctx); err != nil || c.Outbox != 1 {
		t.Fatalf("Counts after an older ack = %+v, %v; want 1 row", c, err)
	}
}

// TestAckLaterCommitsAloneWhenIdle: with no other write, the delete is
// committed on its own once AckDelay has passed.
func TestAckLaterCommitsAloneWhenIdle(t *testing.T) {
	s := openWith(t, filepath.Join(t.TempDir(), "agent.db"), Options{AckDelay: 20 * time.Millisecond})
	seqs := enqueueRows(t, s, 3)
	st0 := s.Stats()
	s.AckLater(seqs[2])
	testutil.Eventually(t, 10*time.Second, "the acknowledged rows deleted", func() bool { return outboxLen(t, s) == 0 })
	if d := s.Stats().Commits - st0.Commits; d != 1 {
		t.Fatalf("%d commits for the delete, want 1", d)
	}
}

// TestAckLaterCommittedAtClose: Close commits the pending delete, so a
// reopened store does not hold (and the agent does not send again) the
// rows acknowledged before it.
func TestAckLaterCommittedAtClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	s := openWith(t, path, Options{AckDelay: time.Hour})
	seqs := enqueueRows(t, s, 2)
	s.AckLater(seqs[1])
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openWith(t, path, Options{})
	if n := outboxLen(t, s2); n != 0 {
		t.Fatalf("the reopened outbox holds %d rows acknowledged before the close, want 0", n)
	}
}
