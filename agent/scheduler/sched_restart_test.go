package scheduler

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestUnstartedFiresAtRestart: an agent stops with fires of an `every: 1m`
// job TRIGGERED but never started (queued), and starts again later on the
// same store (fake clock). Each job's misfire policy decides what happens
// to them: on time (within grace) they run; late, fire_all runs them, skip
// drops them, fire_once runs the newest unless the job runs a fire anyway.
// A dropped one is finished SKIPPED and reported with reason "misfire"; a
// kept one is counted for overlap, so the catch-up fires of a forbid job
// are SKIPPED as overlaps.
func TestUnstartedFiresAtRestart(t *testing.T) {
	const (
		run     = "TRIGGERED"
		misfire = "misfire" // SKIPPED, reported with this reason
		overlap = "overlap"
	)
	tests := []struct {
		name    string
		fires   int // fires triggered (none started) before the stop
		allow   bool
		policy  schedule.MisfirePolicy
		grace   time.Duration
		restart time.Duration  // after the first fire
		want    map[int]string // by minute after the first fire
	}{
		{"fire_once on time", 1, false, schedule.FireOnce, 30 * time.Second, 20 * time.Second, map[int]string{0: run}},
		{"fire_once late, nothing newer due", 1, false, schedule.FireOnce, time.Second, 40 * time.Second, map[int]string{0: run}},
		{"fire_once late, a newer fire runs", 1, false, schedule.FireOnce, time.Second, 5*time.Minute + 30*time.Second,
			map[int]string{0: misfire, 4: misfire, 5: run}},
		{"fire_once keeps the newest of three", 3, true, schedule.FireOnce, time.Second, 2*time.Minute + 40*time.Second,
			map[int]string{0: misfire, 1: misfire, 2: run}},
		{"skip late", 1, false, schedule.Skip, time.Second, 40 * time.Second, map[int]string{0: misfire}},
		{"skip on time", 1, false, schedule.Skip, time.Minute, 40 * time.Second, map[int]string{0: run}},
		{"fire_all late, catch-ups overlap", 1, false, schedule.FireAll, time.Second, 3*time.Minute + 30*time.Second,
			map[int]string{0: run, 1: overlap, 2: overlap, 3: overlap}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := offlineConfig(t, "edge-u")
			start := time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)
			o := newOffline(t, cfg, start)
			j := protocoltest.NewJob("edge-u", "noop", schedule.Spec{Every: "1m"}, nil)
			j.CreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			j.Misfire = protocol.MisfireSpec{Policy: string(tc.policy), Grace: protocol.Duration(tc.grace)}
			if tc.allow {
				j.Overlap, j.Concurrency = protocol.OverlapAllow, 10
			}
			o.apply(protocoltest.AssignCmd(j))
			first := o.fireNext(j.ID)
			for range tc.fires - 1 {
				o.fireNext(j.ID)
			}
			must(t, o.st.Close())

			o2 := newOffline(t, cfg, first.Add(tc.restart))
			must(t, o2.s.Recover(context.Background()))
			o2.sync()
			got := fireStates(t, o2.st, j.ID, first)
			if !maps.Equal(got, tc.want) {
				t.Fatalf("fires after the restart (by minute): %v, want %v", got, tc.want)
			}
			if live := o2.s.jobs.byID[j.ID].active; live != count(tc.want, run) {
				t.Fatalf("job counts %d live attempts, want %d", live, count(tc.want, run))
			}
		})
	}
}

// TestUnstartedRunRunsAtRestart: a run sent by the controller (a one-shot
// job, a trigger or a retry) found TRIGGERED at start runs, however late
// and whatever its job's misfire policy: it is not a fire of the agent's.
func TestUnstartedRunRunsAtRestart(t *testing.T) {
	cfg := offlineConfig(t, "edge-u")
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, cfg, start)
	j := protocoltest.NewJob("edge-u", "noop", schedule.Spec{Asap: true}, nil)
	j.Misfire = protocol.MisfireSpec{Policy: string(schedule.Skip)}
	o.apply(protocoltest.RunCmd(j, 1, start))
	must(t, o.st.Close())

	o2 := newOffline(t, cfg, start.Add(24*time.Hour))
	must(t, o2.s.Recover(context.Background()))
	o2.sync()
	e, ok := o2.row(protocol.ExecID(j.ID, start))
	if !ok || e.State != store.StateTriggered {
		t.Fatalf("run after the restart: %+v (found %v), want TRIGGERED", e, ok)
	}
	if got := fireStates(t, o2.st, j.ID, start); len(got) != 1 {
		t.Fatalf("reports and rows: %v", got)
	}
}

// fireStates returns the job's attempts by minute after first: "TRIGGERED"
// (or another live state), or the reason of the SKIPPED report in the outbox.
func fireStates(t *testing.T, st *store.Store, jobID string, first time.Time) map[int]string {
	t.Helper()
	ctx := context.Background()
	reasons := map[string]string{}
	msgs, err := st.Outbox(ctx, 0, 100000)
	must(t, err)
	for _, m := range msgs {
		r, err := protocol.DecodeReport(m.Data)
		must(t, err)
		if r.Kind == protocol.ReportSkipped {
			reasons[r.ExecID] = r.Reason
		}
	}
	rows, err := st.JobExecs(ctx, jobID, 1000)
	must(t, err)
	got := map[int]string{}
	for _, e := range rows {
		d := e.ScheduledAt.Sub(first)
		if d%time.Minute != 0 {
			t.Fatalf("attempt %s scheduled at %s, off the minute", e.ExecID, e.ScheduledAt)
		}
		s := e.State
		if s == store.StateSkipped {
			if s = reasons[e.ExecID]; s == "" {
				t.Fatalf("attempt %s SKIPPED without a skipped report", e.ExecID)
			}
		}
		got[int(d/time.Minute)] = s
	}
	return got
}

func count(m map[int]string, v string) int {
	return len(slices.DeleteFunc(slices.Collect(maps.Values(m)), func(s string) bool { return s != v }))
}
