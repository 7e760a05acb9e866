package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// TestOutboxSink: rows written before the sink is set stay in the outbox
// only (seq ≤ base); every row committed after is handed over once
// durable, in seq order, except those of a write function that failed
// (rolled back with it) and duplicates of a msg id already there.
func TestOutboxSink(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "agent.db"))
	if err := s.Do(ctx, func(tx *Tx) error { return tx.Enqueue("old", "s", []byte("0")) }); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []OutboxMsg
	base, err := s.SetOutboxSink(ctx, func(rows []OutboxMsg) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, rows...)
	})
	if err != nil {
		t.Fatal(err)
	}
	if base != 1 {
		t.Fatalf("base = %d, want 1 (the row written before)", base)
	}
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, fn := range []func(*Tx) error{
		func(tx *Tx) error { return tx.Enqueue("a", "s", []byte("1")) },
		func(tx *Tx) error {
			if err := tx.Enqueue("b", "s", []byte("2")); err != nil {
				return err
			}
			return boom
		},
		func(tx *Tx) error { return tx.Enqueue("c", "s", []byte("3")) },
	} {
		wg.Add(1)
		s.Submit(fn, func(err error) { errs[i] = err; wg.Done() })
	}
	wg.Wait()
	if !errors.Is(errs[1], boom) || errs[0] != nil || errs[2] != nil {
		t.Fatalf("errors %v, want only the second to fail", errs)
	}
	// Delivery follows the callbacks in the writer: one more write
	// makes sure it happened.
	if err := s.Do(ctx, func(*Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].MsgID != "a" || got[1].MsgID != "c" || got[0].Seq <= base || got[1].Seq <= got[0].Seq ||
		string(got[1].Data) != "3" || got[1].Subject != "s" {
		t.Fatalf("sink got %+v, want a then c after seq %d", got, base)
	}
	stored, err := s.Outbox(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 3 || stored[1].Seq != got[0].Seq || stored[2].Seq != got[1].Seq {
		t.Fatalf("outbox %+v, want old, a, c with the delivered seqs", stored)
	}
}

// TestOutboxRowsWrittenTogether: the outbox rows of one batch are written
// in a few multi-row statements (of up to 32 rows),
// not one statement each; their seqs follow the outbox's highest seq ever
// used (also across a reopen, after every row was acknowledged).
func TestOutboxRowsWrittenTogether(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "agent.db")
	s := open(t, path)
	const n = 100 // 32 + 32 + 32 + 4: four statements
	st0 := s.Stats()
	if err := s.Do(ctx, func(tx *Tx) error {
		for i := range n {
			if err := tx.Enqueue(fmt.Sprintf("m%d", i), "s", []byte("x")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Statements - st0.Statements; got > 4 {
		t.Fatalf("%d outbox rows took %d statements, want ≤ 4", n, got)
	}
	rows, err := s.Outbox(ctx, 0, 2*n)
	if err != nil || len(rows) != n || rows[0].Seq != 1 || rows[n-1].Seq != n || rows[n-1].MsgID != fmt.Sprintf("m%d", n-1) {
		t.Fatalf("outbox %d rows (err %v), want m0..m%d with seqs 1..%d", len(rows), err, n-1, n)
	}
	// Acknowledge all, reopen: new rows continue after seq n.
	if err := s.Do(ctx, func(tx *Tx) error { return tx.Ack(n) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if err := s.Do(ctx, func(tx *Tx) error {
		for _, id := range []string{"a", "b"} {
			if err := tx.Enqueue(id, "s", []byte(id)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	rows, err = s.Outbox(ctx, 0, 10)
	if err != nil || len(rows) != 2 || rows[0].MsgID != "a" || rows[0].Seq != n+1 || rows[1].MsgID != "b" || rows[1].Seq != n+2 {
		t.Fatalf("outbox after reopen %+v (err %v), want a, b with seqs %d, %d", rows, err, n+1, n+2)
	}
}

// TestOutboxSinkHold: a row enqueued with EnqueueHeld reaches the sink
// marked Hold; the row stored is the same as Enqueue's, and read back it
// is not marked.
func TestOutboxSinkHold(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "agent.db"))
	var mu sync.Mutex
	var got []OutboxMsg
	if _, err := s.SetOutboxSink(ctx, func(rows []OutboxMsg) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, rows...)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Do(ctx, func(tx *Tx) error {
		if err := tx.EnqueueHeld("h", "s", []byte("1")); err != nil {
			return err
		}
		return tx.Enqueue("n", "s", []byte("2"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Do(ctx, func(*Tx) error { return nil }); err != nil { // delivery follows the callbacks
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || !got[0].Hold || got[1].Hold {
		t.Fatalf("sink got %+v, want h held and n not", got)
	}
	back, err := s.Outbox(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 || back[0].MsgID != "h" || string(back[0].Data) != "1" || back[0].Hold || back[1].Hold {
		t.Fatalf("read back %+v, want h and n, neither marked", back)
	}
}
