package jobcache

import (
	"encoding/json"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestChangedPeriodic: ChangedPeriodic lists the live periodic jobs whose
// last change (the KV revision's time from the watcher, the clock for a
// write of this replica) is at or after since and that keep accepts;
// not one-shot jobs, not deleted ones, not older changes.
func TestChangedPeriodic(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	jc := New(func() time.Time { return now })
	job := func(id string, spec schedule.Spec) protocol.Job {
		return protocol.Job{ID: id, Name: "j", Handler: "noop", Schedule: spec, Target: protocol.Target{Agent: "edge-1"},
			CreatedAt: t0, Generation: 1}
	}
	apply := func(j protocol.Job, rev uint64, at time.Time) {
		data, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		jc.Apply(kvEntry{key: j.ID, val: data, rev: rev, created: at}, nil)
	}
	every := schedule.Spec{Every: "1m"}
	apply(job("ax-ctl-20261203100000-aaaaaa", every), 1, t0)                      // changed long ago
	apply(job("ax-ctl-20261203100000-bbbbbb", every), 2, now.Add(-time.Second))   // changed just now
	apply(job("ax-ctl-20261203100000-cccccc", schedule.Spec{Asap: true}), 3, now) // one-shot
	apply(job("ax-ctl-20261203100000-dddddd", every), 4, now)
	jc.Remove("ax-ctl-20261203100000-dddddd", 5)                            // deleted
	jc.Put(job("ax-ctl-20261203100000-eeeeee", every), 6)                   // this replica's write: now
	apply(job("ax-ctl-20261203100000-ffffff", every), 7, now)               // changed now,
	moved := job("ax-ctl-20261203100000-ffffff", schedule.Spec{Asap: true}) // then made one-shot
	moved.Generation = 2
	apply(moved, 8, now)

	ids := func(since time.Time, keep func(string) bool) []string {
		var out []string
		for _, j := range jc.ChangedPeriodic(since, keep) {
			out = append(out, j.ID)
		}
		sort.Strings(out)
		return out
	}
	all := func(string) bool { return true }
	if got, want := ids(now.Add(-time.Minute), all), []string{"ax-ctl-20261203100000-bbbbbb", "ax-ctl-20261203100000-eeeeee"}; !slices.Equal(got, want) {
		t.Errorf("changed in the last minute: %v, want %v", got, want)
	}
	if got := ids(t0, all); len(got) != 3 {
		t.Errorf("changed since t0: %v, want the three live periodic jobs", got)
	}
	if got := ids(t0, func(id string) bool { return id == "ax-ctl-20261203100000-aaaaaa" }); !slices.Equal(got, []string{"ax-ctl-20261203100000-aaaaaa"}) {
		t.Errorf("keep one id: %v", got)
	}
}
