package jobcache

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// FuzzCompactRoundTrip: whatever values a one-shot job holds, the cache
// gives back the job that was put, held compact or decoded. The intern
// tables are shared across inputs, as the cache's are across jobs.
func FuzzCompactRoundTrip(f *testing.F) {
	f.Add("close-order-1", "http", `{"url":"http://x/1"}`, "k-1", "edge-1", "site=x", "any", "forbid", "normal", uint8(2), "30m", int64(time.Minute), int64(3), int64(1), 3, "skip", int64(5))
	f.Add("", "", "", "", "", "", "", "", "", uint8(0), "", int64(0), int64(0), int64(0), 0, "", int64(0))
	f.Add("n", "exec", `[1,2]`, "", "", "", "all", "allow", "fine", uint8(1), "2026-12-01T02:00:00Z", int64(-1), int64(-1<<40), int64(1<<40), 0, "fire_once", int64(-7))
	f.Add("\xff\x00", "h\x80", "\x80\x80\x80", "\x01", "a", "b", "odd", "", "", uint8(3), "x", int64(1), int64(2), int64(3), 1, "", int64(1))
	in := newInterner()
	f.Fuzz(func(t *testing.T, name, handler, payload, idem, agent, group, mode, overlap, precision string,
		kind uint8, sched string, timeout, priority, concurrency int64, maxAttempts int, misfire string, createdNanos int64) {
		j := protocol.Job{ID: "ax-n-20261201000000-abcdef", Name: name, Handler: handler, IdempotencyKey: idem,
			Target:  protocol.Target{Agent: agent, Group: group, Mode: mode},
			Overlap: overlap, Precision: precision, Timeout: protocol.Duration(timeout),
			Priority: int(priority), Concurrency: int(concurrency), Generation: 1,
			Retry:   protocol.RetrySpec{MaxAttempts: maxAttempts},
			Misfire: protocol.MisfireSpec{Policy: misfire}}
		if payload != "" {
			j.Payload = json.RawMessage(payload)
		}
		switch kind % 4 {
		case 0:
			j.Schedule = schedule.Spec{Asap: true}
		case 1:
			j.Schedule = schedule.Spec{At: sched}
		case 2:
			j.Schedule = schedule.Spec{Delay: sched}
		case 3:
			j.Schedule = schedule.Spec{Every: sched} // periodic: held decoded
		}
		if createdNanos != 0 {
			j.CreatedAt = time.Unix(0, createdNanos).UTC()
		}
		cj := entryOf(&j, 1, in, &slab{})
		got := cj.spec(j.ID, in.tab)
		if !got.CreatedAt.Equal(j.CreatedAt) {
			t.Fatalf("created_at %v, want %v", got.CreatedAt, j.CreatedAt)
		}
		got.CreatedAt, j.CreatedAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, j) {
			t.Fatalf("compact %v:\n got %+v\nwant %+v", cj.one != "", got, j)
		}
	})
}
