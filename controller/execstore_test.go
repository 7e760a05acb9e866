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
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for gen := 2; ; gen++ {
			for i := range n {
				select {
				case <-stop:
					return
				default:
				}
				put(i, gen)
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
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
