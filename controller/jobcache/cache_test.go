package jobcache

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// kvEntry is a jetstream.KeyValueEntry made by hand.
type kvEntry struct {
	key     string
	val     []byte
	rev     uint64
	created time.Time
}

func (e kvEntry) Bucket() string                  { return protocol.BucketJobs }
func (e kvEntry) Key() string                     { return e.key }
func (e kvEntry) Value() []byte                   { return e.val }
func (e kvEntry) Revision() uint64                { return e.rev }
func (e kvEntry) Created() time.Time              { return e.created }
func (e kvEntry) Delta() uint64                   { return 0 }
func (e kvEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

// TestJobCacheSkipsKnownRevision: the watcher's copy of a write this
// replica already put in the cache (its own create or update, at the same
// revision) is not decoded again; a newer revision is. The value given is
// not JSON, so a decode shows as a logged error.
func TestJobCacheSkipsKnownRevision(t *testing.T) {
	jc := New(nil)
	logs := &testutil.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	j := protocol.Job{ID: "ax-ctl-20260101000000-aaaaaa", Name: "asap", Handler: "noop", Schedule: schedule.Spec{Asap: true},
		Target: protocol.Target{Agent: "edge-1"}}
	jc.Put(j, 5)
	jc.Apply(kvEntry{key: j.ID, val: []byte("not json"), rev: 5}, log)
	if strings.Contains(logs.String(), "bad job record") {
		t.Errorf("the entry at the cached revision was decoded: %s", logs.String())
	}
	if got, rev, ok := jc.Get(j.ID); !ok || rev != 5 || got.Name != j.Name {
		t.Errorf("cache after the known entry: %+v at %d (%v), want the job at 5", got, rev, ok)
	}
	jc.Apply(kvEntry{key: j.ID, val: []byte("not json"), rev: 6}, log)
	if !strings.Contains(logs.String(), "bad job record") {
		t.Error("the entry at a newer revision was not decoded")
	}
}

// TestJobCachePageMatchesSortedScan: paging the cache with the bounded
// id index gives what sorting every live job gives, page after page, with
// and without a filter, tombstones skipped and jobs put again after their
// removal listed.
func TestJobCachePageMatchesSortedScan(t *testing.T) {
	jc := New(nil)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var live []protocol.Job
	for i := range 1000 {
		j := protocol.Job{ID: protocol.NewJobID("ctl-1", at.Add(time.Duration(i%7)*time.Second), uint32(i*7919)), Name: "n", Handler: "noop", Paused: i%3 == 0}
		jc.Put(j, uint64(i+1))
		if i%10 == 9 {
			jc.Remove(j.ID, uint64(2000+i))
			if i%20 == 19 { // put again at a newer revision: live again
				jc.Put(j, uint64(4000+i))
				live = append(live, j)
			}
			continue
		}
		jc.Put(j, uint64(i+1)) // the same revision again changes nothing
		live = append(live, j)
	}
	slices.SortFunc(live, func(a, b protocol.Job) int { return strings.Compare(a.ID, b.ID) })
	for _, tc := range []struct {
		name  string
		match func(*protocol.Job) bool
	}{
		{"all", func(*protocol.Job) bool { return true }},
		{"paused", func(j *protocol.Job) bool { return j.Paused }},
		{"none", func(*protocol.Job) bool { return false }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for _, j := range live {
				if tc.match(&j) {
					want = append(want, j.ID)
				}
			}
			var got []string
			after := ""
			for range len(live) + 1 {
				page := jc.Page(after, 37, tc.match)
				for _, j := range page {
					got = append(got, j.ID)
				}
				if len(page) < 37 {
					break
				}
				after = page[len(page)-1].ID
			}
			if !slices.Equal(got, want) {
				t.Fatalf("paged %d ids, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
			}
		})
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// BenchmarkJobCachePage is one page of 51 (a ListJobs page of 50 and its
// cursor) from a job cache of 300,000 live one-shot jobs pinned to one
// agent, with the agent filter GET /v1/jobs?agent= applies.
func BenchmarkJobCachePage(b *testing.B) {
	spec := protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "30m"}, Target: protocol.Target{Agent: "edge-1"}}.WithDefaults()
	jc := New(nil)
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range 300_000 {
		j := spec
		j.ID = protocol.NewJobID("ctl-1", at.Add(time.Duration(i/5000)*time.Second), uint32(i*7919))
		jc.Put(j, uint64(i+1))
	}
	for b.Loop() {
		if page := jc.Page("", 51, func(j *protocol.Job) bool { return j.Target.Agent == "edge-1" }); len(page) != 51 {
			b.Fatalf("page of %d jobs, want 51", len(page))
		}
	}
}

// The job cache indexes the jobs a registration looks at: periodic jobs
// pinned to each agent and periodic group jobs of mode all, kept right
// when a job is re-targeted, changes kind or is deleted.
func TestJobCacheIndexesRegistrationJobs(t *testing.T) {
	jc := New(nil)
	ids := func(js []protocol.Job) string {
		s := ""
		for _, j := range js {
			s += j.ID + " "
		}
		return s
	}
	every := schedule.Spec{Every: "1m"}
	jc.Put(protocol.Job{ID: "p1", Schedule: every, Target: protocol.Target{Agent: "a"}}, 1)
	jc.Put(protocol.Job{ID: "p2", Schedule: every, Target: protocol.Target{Agent: "a"}}, 2)
	jc.Put(protocol.Job{ID: "o1", Schedule: schedule.Spec{Asap: true}, Target: protocol.Target{Agent: "a"}}, 3)
	jc.Put(protocol.Job{ID: "g1", Schedule: every, Target: protocol.Target{Group: "site=x", Mode: protocol.ModeAll}}, 4)
	jc.Put(protocol.Job{ID: "g2", Schedule: every, Target: protocol.Target{Group: "site=x"}}, 5) // mode any
	if got := ids(jc.PinnedTo("a")); got != "p1 p2 " {
		t.Fatalf("pinned to a: %q", got)
	}
	if got := ids(jc.GroupAllJobs()); got != "g1 " {
		t.Fatalf("group all: %q", got)
	}
	jc.Put(protocol.Job{ID: "p1", Schedule: every, Target: protocol.Target{Agent: "b"}}, 6)
	jc.Put(protocol.Job{ID: "g1", Schedule: every, Target: protocol.Target{Group: "site=x"}}, 7)
	jc.Remove("p2", 8)
	jc.Put(protocol.Job{ID: "p2", Schedule: every, Target: protocol.Target{Agent: "a"}}, 2) // older: ignored
	if got := ids(jc.PinnedTo("a")) + "|" + ids(jc.PinnedTo("b")) + "|" + ids(jc.GroupAllJobs()); got != "|p1 |" {
		t.Fatalf("after re-target, mode change and delete: %q", got)
	}
	if len(jc.pinned) != 1 {
		t.Fatalf("index holds %d agents, want 1 (b)", len(jc.pinned))
	}
}

// TestJobCacheDeleted: Deleted lists the tombstones, and only until they
// are pruned.
func TestJobCacheDeleted(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	jc := New(func() time.Time { return now })
	live := protocol.Job{ID: "ax-ctl-20260101000000-aaaaaa", Name: "a", Handler: "noop", Schedule: schedule.Spec{Asap: true},
		Target: protocol.Target{Agent: "edge-1"}}
	gone := live
	gone.ID = "ax-ctl-20260101000000-bbbbbb"
	jc.Put(live, 1)
	jc.Put(gone, 2)
	jc.Remove(gone.ID, 3)
	jc.Remove("ax-ctl-20260101000000-cccccc", 4) // a marker of a job this cache never held
	got := jc.Deleted()
	slices.Sort(got)
	if want := []string{gone.ID, "ax-ctl-20260101000000-cccccc"}; !slices.Equal(got, want) {
		t.Fatalf("Deleted = %v, want %v", got, want)
	}
	jc.PruneTombstones(now.Add(time.Second), now.Add(time.Second))
	if got := jc.Deleted(); len(got) != 0 {
		t.Fatalf("Deleted after the prune = %v, want none", got)
	}
}
