package controller

import (
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// BenchmarkListExecutions measures one ListExecutions page (limit 50)
// with AX_BENCH_HISTORY (default 100,000) terminal executions stored, both
// in ax_execs and in AX_EVT (so in the history index): from the index
// (ListExecutions) and by the whole-bucket scan it replaced
// (listExecutionsScan, the code before), in alternating rounds in one
// process, without a filter and with the filters job, agent+state and a
// one-hour scheduled range. Metrics: p99-ms of the calls of each run, and
// once, index-events/s: how fast the history follower indexed the events.
func BenchmarkListExecutions(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("AX_BENCH_HISTORY")); err == nil && v > 0 {
		n = v
	}
	cfg := testConfig(b, b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	c := startController(b, cfg)
	ctx := context.Background()
	jobs, t0 := populateHistory(b, c, n)
	filters := []struct {
		name string
		f    ExecFilter
	}{
		{"nofilter", ExecFilter{}},
		{"job", ExecFilter{JobID: jobs[len(jobs)/2]}},
		{"agent+state", ExecFilter{Agent: "bench-3", State: protocol.StateFailed}},
		{"time-1h", ExecFilter{From: t0.Add(30 * time.Minute), To: t0.Add(90 * time.Minute)}},
	}
	run := func(name string, list func(context.Context, ExecFilter) ([]protocol.Execution, string, error), f ExecFilter) {
		b.Run(name, func(b *testing.B) {
			f.Limit = 50
			var lat []time.Duration
			for b.Loop() {
				t := time.Now()
				es, _, err := list(ctx, f)
				if err != nil || len(es) == 0 {
					b.Fatalf("list %+v: %d, %v", f, len(es), err)
				}
				lat = append(lat, time.Since(t))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
	for range 2 {
		for _, fl := range filters {
			run("index/"+fl.name, c.ListExecutions, fl.f)
			run("scan/"+fl.name, c.listExecutionsScan, fl.f)
		}
	}
}

// populateHistory stores n terminal executions of n/100 jobs on 16 agents,
// scheduled a minute apart per job from t0: their records in ax_execs and
// their final events in AX_EVT, and waits until the index has them all.
func populateHistory(b *testing.B, c *Controller, n int) ([]string, time.Time) {
	b.Helper()
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	perJob := 100
	var jobs []string
	for i := range max(n/perJob, 1) {
		jobs = append(jobs, protocol.NewJobID("bench", t0.Add(time.Duration(i)*time.Second), rand.Uint32()))
	}
	states := []protocol.State{protocol.StateSuccess, protocol.StateSuccess, protocol.StateSuccess, protocol.StateFailed, protocol.StateCancelled}
	start := time.Now()
	var futs []jetstream.PubAckFuture
	flush := func() {
		for _, f := range futs {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatalf("publish: %v", err)
			}
		}
		futs = futs[:0]
	}
	for i := range n {
		job := jobs[i%len(jobs)]
		at := t0.Add(time.Duration(i/len(jobs)) * time.Minute)
		st := states[i%len(states)]
		rec := execRecord{Execution: protocol.Execution{ExecID: protocol.ExecID(job, at), JobID: job, Attempt: 1, State: st,
			Agent: "bench-" + strconv.Itoa(i%16), ScheduledAt: at, CreatedAt: at, UpdatedAt: at.Add(time.Second),
			TriggeredAt: at, StartedAt: at, FinishedAt: at.Add(time.Second), Outcome: retry.OutcomeSuccess, Duration: protocol.Duration(time.Second)}}
		data, err := json.Marshal(rec)
		if err != nil {
			b.Fatal(err)
		}
		f, err := c.js.PublishAsync(kvSubject(protocol.BucketExecs, rec.ExecID), data)
		if err != nil {
			b.Fatal(err)
		}
		snap := rec.Execution
		ev := protocol.Event{V: protocol.Version, JobID: job, ExecID: rec.ExecID, Attempt: 1, From: protocol.StateRunning, To: st,
			At: rec.UpdatedAt, Agent: rec.Agent, Execution: &snap}
		evData, err := protocol.Encode(ev)
		if err != nil {
			b.Fatal(err)
		}
		g, err := c.js.PublishAsync(protocol.EventSubject(st, job), evData)
		if err != nil {
			b.Fatal(err)
		}
		if futs = append(futs, f, g); len(futs) >= 4096 {
			flush()
		}
	}
	flush()
	stored := time.Since(start)
	info, err := c.hist.evt.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if !c.hist.waitFor(wctx, info.State.LastSeq) {
		b.Fatal("history index did not catch up")
	}
	b.Logf("%d executions stored in %s, indexed %s later", n, stored.Round(time.Millisecond), (time.Since(start) - stored).Round(time.Millisecond))
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "index-events/s")
	return jobs, t0
}

// listExecutionsScan is ListExecutions as it was before the history index:
// a pass over the whole bucket, filtered and sorted in memory.
func (c *Controller) listExecutionsScan(ctx context.Context, f ExecFilter) ([]protocol.Execution, string, error) {
	limit, err := pageSize(f.Limit)
	if err != nil {
		return nil, "", err
	}
	var all []protocol.Execution
	err = c.scanExecs(ctx, func(r *execRecord, _ uint64) {
		if f.After != "" && r.ExecID <= f.After || f.State != "" && r.State != f.State ||
			f.JobID != "" && r.JobID != f.JobID || f.Agent != "" && r.Agent != f.Agent ||
			!f.From.IsZero() && r.ScheduledAt.Before(f.From) || !f.To.IsZero() && !r.ScheduledAt.Before(f.To) {
			return
		}
		all = append(all, r.Execution)
	})
	if err != nil {
		return nil, "", err
	}
	sort.Slice(all, func(i, k int) bool { return all[i].ExecID < all[k].ExecID })
	if len(all) > limit {
		return all[:limit], all[limit-1].ExecID, nil
	}
	return all, "", nil
}
