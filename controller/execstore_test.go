package controller

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/axsched/ax/pkg/protocol"
)

// TestScanExecsSeesKeysUpdatedDuringTheScan: a key rewritten while a scan
// runs (History 1 drops its old message) is still seen, once, with a value
// at least as new as the scan's start.
func TestScanExecsSeesKeysUpdatedDuringTheScan(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	const n = 300
	defer rewriteExecs(t, c, n)()
	for scan := range 40 {
		got := map[string]int{}
		if err := c.ex.scanExecs(ctx, func(r *execRecord, _ uint64) { got[r.ExecID]++ }); err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("scan %d saw %d of %d executions", scan, len(got), n)
		}
		for id, k := range got {
			if k != 1 {
				t.Fatalf("scan %d gave %s %d times", scan, id, k)
			}
		}
	}
}

// TestScanExecsOfLatestRevisionDecides: a record pick leaves out still
// counts as its key's latest; fn never gets an older revision of a key
// that pick took while a newer one it left out was read. Every key is
// rewritten during the scans with an attempt that only grows, picked when
// odd: the attempt fn gets for a key is the highest pick saw for it.
func TestScanExecsOfLatestRevisionDecides(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	const n = 300
	defer rewriteExecs(t, c, n)()
	left := 0
	for scan := range 40 {
		var mu sync.Mutex
		highest := map[string]int{}
		pick := func(r *execRecord) (int, bool) {
			mu.Lock()
			highest[r.ExecID] = max(highest[r.ExecID], r.Attempt)
			mu.Unlock()
			return r.Attempt, r.Attempt%2 == 1
		}
		got := map[string]int{}
		err := scanExecsOf(ctx, c.ex, pick, func(key string, attempt int, _ uint64) {
			if _, dup := got[key]; dup {
				t.Fatalf("scan %d gave %s twice", scan, key)
			}
			got[key] = attempt
		}, 0)
		if err != nil {
			t.Fatal(err)
		}
		for key, h := range highest {
			a, ok := got[key]
			switch {
			case ok && a != h:
				t.Fatalf("scan %d gave %s at attempt %d; it read attempt %d after it", scan, key, a, h)
			case !ok && h%2 == 1:
				t.Fatalf("scan %d left out %s, whose latest attempt %d it picks", scan, key, h)
			case !ok:
				left++
			}
		}
		if len(highest) != n {
			t.Fatalf("scan %d read %d of %d executions", scan, len(highest), n)
		}
	}
	if left == 0 {
		t.Fatal("no scan read a key whose latest attempt pick left out; the test proves nothing")
	}
}

// rewriteExecs puts n RUNNING executions (exec-000…) at attempt 1, then
// rewrites them all, over and over, with an attempt one higher each round,
// until the returned stop is called.
func rewriteExecs(t *testing.T, c *Controller, n int) (stop func()) {
	t.Helper()
	ctx := tctx(t)
	put := func(i, gen int) {
		rec := execRecord{Execution: protocol.Execution{ExecID: fmt.Sprintf("exec-%03d", i), JobID: "job", Attempt: gen, State: protocol.StateRunning}}
		data, err := json.Marshal(rec)
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := c.kv.Execs.Put(ctx, rec.ExecID, data); err != nil {
			t.Error(err)
		}
	}
	for i := range n {
		put(i, 1)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for gen := 2; ; gen++ {
			for i := range n {
				select {
				case <-done:
					return
				default:
				}
				put(i, gen)
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
