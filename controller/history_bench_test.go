package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/histindex"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// BenchmarkListExecutions measures one ListExecutions page (limit 50)
// with AX_BENCH_HISTORY (default 100,000) terminal executions stored, both
// in ax_execs and in AX_EVT (so in the history index): from the index
// (ListExecutions) and by the whole-bucket scan it replaced
// (listExecutionsScan, the code before), in alternating rounds in one
// process, without a filter and with the filters job, agent+state and a
// one-hour scheduled range. Metric p99-ms: of the calls of each run. The
// log (-v) says how long storing and indexing took. The sweeper is off:
// the records stay in ax_execs for the scan.
func BenchmarkListExecutions(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("AX_BENCH_HISTORY")); err == nil && v > 0 {
		n = v
	}
	cfg := testConfig(b, b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.historySweep = 24 * time.Hour // the records stay in ax_execs for the scan
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
			run("scan/"+fl.name, c.ex.listExecutionsScan, fl.f)
		}
	}
}

// populateHistory stores n terminal executions of n/100 jobs on 16 agents,
// scheduled a minute apart per job from t0: their records in ax_execs and
// their final events in AX_EVT, and waits until the index has them all.
func populateHistory(b testing.TB, c *Controller, n int) ([]string, time.Time) {
	b.Helper()
	ctx := context.Background()
	// Ended past the grace, well within the retention.
	t0 := time.Now().UTC().Add(-DefaultDedupWindow - 3*time.Hour).Truncate(time.Hour)
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
	recs := make([]execRecord, n)
	for i := range n {
		job := jobs[i%len(jobs)]
		at := t0.Add(time.Duration(i/len(jobs)) * time.Minute)
		recs[i] = execRecord{Execution: protocol.Execution{ExecID: protocol.ExecID(job, at), JobID: job, Attempt: 1, State: states[i%len(states)],
			Agent: "bench-" + strconv.Itoa(i%16), ScheduledAt: at, CreatedAt: at, UpdatedAt: at.Add(time.Second),
			TriggeredAt: at, StartedAt: at, FinishedAt: at.Add(time.Second), Outcome: retry.OutcomeSuccess, Duration: protocol.Duration(time.Second)}}
	}
	// Records first, then their events, as the controller writes them.
	for _, rec := range recs {
		data, err := json.Marshal(rec)
		if err != nil {
			b.Fatal(err)
		}
		f, err := c.js.PublishAsync(streams.KVSubject(protocol.BucketExecs, rec.ExecID), data)
		if err != nil {
			b.Fatal(err)
		}
		if futs = append(futs, f); len(futs) >= 4096 {
			flush()
		}
	}
	flush()
	for _, rec := range recs {
		snap := rec.Execution
		ev := protocol.Event{V: protocol.Version, JobID: rec.JobID, ExecID: rec.ExecID, Attempt: 1, From: protocol.StateRunning, To: rec.State,
			At: rec.UpdatedAt, Agent: rec.Agent, Execution: &snap}
		evData, err := protocol.Encode(ev)
		if err != nil {
			b.Fatal(err)
		}
		// With its Msg-Id, as the controller publishes it: a restart within
		// AX_EVT's de-duplication window reads it back into the server's map.
		g, err := c.js.PublishAsync(protocol.EventSubject(rec.State, rec.JobID), evData,
			jetstream.WithMsgID(protocol.EventMsgID(rec.ExecID, 1, rec.State)))
		if err != nil {
			b.Fatal(err)
		}
		if futs = append(futs, g); len(futs) >= 4096 {
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
	b.Logf("%d executions stored (record and event) in %s, all indexed %s later (%.0f events/s overall)", n, stored.Round(time.Millisecond),
		(time.Since(start) - stored).Round(time.Millisecond), float64(n)/time.Since(start).Seconds())
	return jobs, t0
}

// listExecutionsScan is ListExecutions as it was before the history index:
// a pass over the whole bucket, filtered and sorted in memory.
func (c *execService) listExecutionsScan(ctx context.Context, f ExecFilter) ([]protocol.Execution, string, error) {
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

// BenchmarkRestartWithHistory measures a controller restart (after an
// untimed Close: New and Start until ready, the embedded server's recovery
// and the reload of the executions included) with AX_BENCH_RESTART
// (default 20,000) terminal executions stored: "swept", after the sweeper
// removed them from ax_execs (they are in history only: AX_EVT and the
// index), against "empty", a controller with no history at all, and
// "kept", with the sweeper off, so they stay in ax_execs as they did
// before retention (the reload scans them all). "<arm>-takeover" times
// the reload a replica runs when it acquires shards (of all of them) on
// the running controller.
// AX_BENCH_RESTART_ARMS (default "empty,kept,swept") picks the arms;
// they restart in alternating rounds (AX_BENCH_RESTART_ROUNDS, default 3).
// AX_BENCH_RESTART_SETTLE (a duration, default none) waits that long after
// the arms are populated before the first restart: past AX_EVT's Msg-Id
// window (2 minutes), so that a restart does not read the populating
// events' Msg-Ids back, as a restart long after them does not.
func BenchmarkRestartWithHistory(b *testing.B) {
	n := 20_000
	if v, err := strconv.Atoi(os.Getenv("AX_BENCH_RESTART")); err == nil && v > 0 {
		n = v
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("AX_BENCH_RESTART_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	arms := strings.Split(cmp.Or(os.Getenv("AX_BENCH_RESTART_ARMS"), "empty,kept,swept"), ",")
	type arm struct {
		name string
		c    *Controller
		cfg  Config
	}
	var started []*arm
	for _, name := range arms {
		cfg := testConfig(b, b.TempDir())
		cfg.Logger = slog.New(slog.DiscardHandler)
		cfg.historySweep = 24 * time.Hour
		if name == "swept" {
			cfg.historySweep = 20 * time.Millisecond
		}
		a := &arm{name: name, cfg: cfg, c: startController(b, cfg)}
		switch name {
		case "empty":
		case "kept":
			populateHistory(b, a.c, n)
		case "swept":
			populateHistory(b, a.c, n)
			waitSwept(b, a.c, n)
		default:
			b.Fatalf("AX_BENCH_RESTART_ARMS: unknown arm %q (empty, kept, swept)", name)
		}
		started = append(started, a)
	}
	if v := os.Getenv("AX_BENCH_RESTART_SETTLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			b.Fatalf("AX_BENCH_RESTART_SETTLE: %q is not a duration of 0 or more", v)
		}
		b.Logf("waiting %s (AX_BENCH_RESTART_SETTLE) before the first restart", d)
		<-time.After(d)
	}
	all := make(map[int]bool)
	for i := range started[0].cfg.Shards {
		all[i] = true
	}
	for range rounds {
		for _, a := range started {
			b.Run(a.name, func(b *testing.B) {
				for b.Loop() {
					b.StopTimer()
					_ = a.c.Close()
					a.cfg.Registry = nil
					b.StartTimer()
					a.c = startController(b, a.cfg) // to ready: reload included
				}
			})
		}
		// What a replica does when it takes shards over: the reload of
		// their live executions, here of every shard.
		for _, a := range started {
			b.Run(a.name+"-takeover", func(b *testing.B) {
				// The restarts' controller ended with their sub-benchmark.
				_ = a.c.Close()
				a.cfg.Registry = nil
				a.c = startController(b, a.cfg)
				for b.Loop() {
					if err := a.c.reloader.reloadShards(context.Background(), all); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// waitSwept polls until c's sweeper has emptied ax_execs of the n
// executions populateHistory stored.
func waitSwept(b *testing.B, c *Controller, n int) {
	b.Helper()
	ctx := context.Background()
	sweepStart := time.Now()
	deadline := sweepStart.Add(30 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := c.js.Stream(ctx, streams.KVStream(protocol.BucketExecs))
		if err != nil {
			b.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if info.State.Msgs == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("sweeper left %d messages in ax_execs", info.State.Msgs)
		}
		<-tick.C
	}
	b.Logf("sweeper removed %d executions from ax_execs in %s (%.0f/s, marker purges included)", n,
		time.Since(sweepStart).Round(time.Millisecond), float64(n)/time.Since(sweepStart).Seconds())
}

// BenchmarkHistoryIndexApply measures the history index's writes alone:
// batches of 1,000 new execution snapshots into a SQLite file (one
// transaction each, the cursor with them). Metric rows/s.
func BenchmarkHistoryIndexApply(b *testing.B) {
	ctx := context.Background()
	idx, err := histindex.Open(ctx, b.TempDir()+"/"+historyFile, 16)
	if err != nil {
		b.Fatal(err)
	}
	defer idx.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	jobs := make([]string, 1000)
	for i := range jobs {
		jobs[i] = protocol.NewJobID("bench", t0, rand.Uint32())
	}
	items := make([]histindex.Item, 1000)
	seq := uint64(0)
	start := time.Now()
	w0 := wchar(b)
	for b.Loop() {
		for i := range items {
			seq++
			at := t0.Add(time.Duration(seq) * time.Second)
			e := &protocol.Execution{ExecID: protocol.ExecID(jobs[i], at), JobID: jobs[i], Attempt: 1, State: protocol.StateSuccess,
				Agent: "bench-" + strconv.Itoa(i%16), ScheduledAt: at, UpdatedAt: at, Outcome: retry.OutcomeSuccess}
			items[i] = histindex.Item{Exec: e}
		}
		if err := idx.Apply(ctx, items, seq); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(seq)/time.Since(start).Seconds(), "rows/s")
	b.ReportMetric(float64(wchar(b)-w0)/float64(seq), "written-B/row")
}

// wchar returns the bytes this process has passed to write system calls
// (/proc/self/io), or 0 where that file is missing.
func wchar(tb testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
