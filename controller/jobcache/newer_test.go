package jobcache

import (
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestJobCacheNewer: Newer says whether the cache holds a job at a later
// revision than the one asked about, and whether that is the live job or
// its deletion.
func TestJobCacheNewer(t *testing.T) {
	jc := New(func() time.Time { return time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC) })
	const id = "ax-ctl-20261204100000-abcdef"
	if _, _, newer := jc.Newer(id, 1); newer {
		t.Fatal("Newer of an unknown job = true")
	}
	j := protocol.Job{ID: id, Name: "n", Handler: "h", Generation: 2, Schedule: schedule.Spec{Every: "1m"},
		Target: protocol.Target{Agent: "edge-1"}}
	jc.Put(j, 5)
	for _, tc := range []struct {
		rev            uint64
		newer, deleted bool
	}{{4, true, false}, {5, false, false}, {6, false, false}} {
		got, deleted, newer := jc.Newer(id, tc.rev)
		if newer != tc.newer || deleted != tc.deleted || (newer && got.Generation != 2) {
			t.Errorf("Newer(%d) after a put at 5 = %d, %v, %v; want newer %v, deleted %v", tc.rev, got.Generation, deleted, newer, tc.newer, tc.deleted)
		}
	}
	next := protocol.Job{ID: id, Generation: 1}
	if got := jc.Latest(id, 4, &next); got == nil || got.Generation != 2 {
		t.Errorf("Latest(4) after a put at 5 = %+v, want the cached generation 2", got)
	}
	if got := jc.Latest(id, 5, &next); got != &next {
		t.Errorf("Latest(5) after a put at 5 = %+v, want next itself", got)
	}
	jc.Remove(id, 9)
	if got := jc.Latest(id, 5, &next); got != nil {
		t.Errorf("Latest(5) after a delete at 9 = %+v, want nil", got)
	}
	for _, tc := range []struct {
		rev            uint64
		newer, deleted bool
	}{{5, true, true}, {8, true, true}, {9, false, false}} {
		if _, deleted, newer := jc.Newer(id, tc.rev); newer != tc.newer || deleted != tc.deleted {
			t.Errorf("Newer(%d) after a delete at 9 = %v, %v; want newer %v, deleted %v", tc.rev, deleted, newer, tc.newer, tc.deleted)
		}
	}
}
