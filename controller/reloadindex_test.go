package controller

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// indexReloadConfig has reloads lean on the history index for the
// records written a moment ago: the write marks' margin and the reload's
// skew are tiny.
func indexReloadConfig(cfg *Config) {
	cfg.marksMargin = time.Nanosecond
	cfg.reloadSkew = time.Millisecond
}

// laterJob is a one-shot job pinned to agent, due in an hour.
func laterJob(agent string) protocol.Job {
	return protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"}, Target: protocol.Target{Agent: agent}}
}

// isRunOf matches the run command of attempt (0: any) of job jobID.
func isRunOf(jobID string, attempt int) func(protocol.Command) bool {
	return func(c protocol.Command) bool { return isRun("", attempt)(c) && c.Run.Job.ID == jobID }
}

// TestReloadLeansOnTheIndex: a restart whose reload leans on the history
// index (the store's first reload, a scan, found no record of an earlier
// version) reads no delayed PENDING run written before the write marks
// (the scan read all five), and still re-arms the timer of an execution
// waiting for its retry (run 2 reaches the agent after the restart),
// still places an execution that waits for an agent of its group (run 1
// reaches the first such agent), and still checks the record written
// since a killed process's mark. A mark older than most records, and
// reloadScanOnly, have the store scanned: every PENDING run counted.
func TestReloadLeansOnTheIndex(t *testing.T) {
	cfg, c1, a := onExternalServer(t, indexReloadConfig)
	ctx := tctx(t)
	a.register()
	const delayed = 5
	for range delayed {
		if _, err := c1.CreateJob(ctx, laterJob("edge-1")); err != nil {
			t.Fatal(err)
		}
	}
	job, err := c1.CreateJob(ctx, retryJob("edge-1", 3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	run := a.waitCommand("run 1", isRunOf(job.ID, 1)).Run
	a.runAttempt(job.ID, run.ExecID, 1, run.RunAt, retry.OutcomeFailure, transient)
	waitExec(t, c1, run.ExecID, "RETRY_WAITING", inState(protocol.StateRetryWaiting))
	unplaced, err := c1.CreateJob(ctx, protocol.Job{Name: "nowhere", Handler: "noop", Schedule: schedule.Spec{Asap: true},
		Target: protocol.Target{Group: "site=nowhere"}})
	if err != nil {
		t.Fatal(err)
	}
	var waiting string
	eventually(t, 10*time.Second, "the PENDING execution without an agent", func() bool {
		es, _, err := c1.ListExecutions(ctx, ExecFilter{JobID: unplaced.ID})
		if err == nil && len(es) == 1 && es[0].State == protocol.StatePending && es[0].Agent == "" {
			waiting = es[0].ExecID
		}
		return waiting != ""
	})
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	a.close()

	c3, r, logs := restartForReloadLogs(t, cfg)
	if r["from_index"] != true || r["pending"] != float64(0) || r["retry_waiting"] != float64(1) || r["checked"] != float64(0) {
		t.Fatalf("reload after clean stops: %v; want from_index, no PENDING run read, 1 retry waiting, none checked", r)
	}
	// Nothing was written since: the read from the stream ends at once,
	// not after waiting for records that cannot come.
	if strings.Contains(logs.String(), "stream position not reached") {
		t.Fatalf("the read of the records written since waited for the stream's end:\n%s", logs)
	}
	b := newTestAgent(t, cfg.NATS.URL, "edge-1", nil).start()
	b.register()
	b.waitCommand("run 2 after the restart", isRun(run.ExecID, 2))
	g := newTestAgent(t, cfg.NATS.URL, "edge-2", map[string]string{"site": "nowhere"}).start()
	g.register()
	g.waitCommand("the waiting run, placed", isRun(waiting, 1))
	if err := c3.Close(); err != nil {
		t.Fatal(err)
	}

	// One more delayed run, written after a killed process's mark: it
	// alone is read from the stream and checked. (A mark from before
	// every record would have the stream read most of the bucket: that
	// reload scans.)
	c4 := startController(t, cfg)
	mark := c4.now()
	if _, err := c4.CreateJob(ctx, laterJob("edge-1")); err != nil {
		t.Fatal(err)
	}
	if err := c4.Close(); err != nil {
		t.Fatal(err)
	}
	leaveDeadMark(t, cfg, mark)
	c5, r := restartForReload(t, cfg)
	// Read: that run, and by key the retry and the run placed on edge-2
	// (due: its schedule was asap); checked: that run alone.
	if r["from_index"] != true || r["pending"] != float64(2) || r["unchecked"] != float64(2) || r["checked"] != float64(1) || r["pending_resent"] != float64(0) {
		t.Fatalf("reload after a killed process's mark: %v; want from_index, 3 records read, the run written since checked, none re-sent", r)
	}
	if err := c5.Close(); err != nil {
		t.Fatal(err)
	}
	leaveDeadMark(t, cfg, job.CreatedAt.Add(-time.Minute))
	c6, r := restartForReload(t, cfg)
	if r["from_index"] != false || r["checked"] != float64(delayed+3) {
		t.Fatalf("reload after a killed process's mark from before every record: %v; want a scan checking %d records", r, delayed+3)
	}
	if err := c6.Close(); err != nil {
		t.Fatal(err)
	}

	cfg.reloadScanOnly = true
	c7, r := restartForReload(t, cfg)
	if r["from_index"] != false || r["pending"] != float64(delayed+2) {
		t.Fatalf("reload with reloadScanOnly: %v; want a scan counting %d PENDING runs", r, delayed+2)
	}
	if err := c7.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestIndexReloadFallsBackOnUntrackedRecord: on a store whose last full
// reload found no record of an earlier version, one written since the
// write marks (an earlier version writing again) sends the reload back
// to the scan, which checks it (its lost run is sent) and stores that the
// store holds such records; the next reload scans too.
func TestIndexReloadFallsBackOnUntrackedRecord(t *testing.T) {
	cfg, c1, a := onExternalServer(t, indexReloadConfig)
	ctx := tctx(t)
	a.register()
	j, err := c1.CreateJob(ctx, laterJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	a.waitCommand("the job's own run", isRunOf(j.ID, 0))
	before := c1.now()
	// A second execution of the job as an earlier version stores it (no
	// "tracked"), whose run never went out, after a killed process's mark.
	rec := putUntrackedRecord(t, c1, j.ID, c1.now())
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	leaveDeadMark(t, cfg, before)
	c2, r := restartForReload(t, cfg)
	if r["from_index"] != false || r["pending_resent"] != float64(1) {
		t.Fatalf("reload %v: want a scan (an untracked record since the marks) re-sending its run", r)
	}
	a.waitCommand("the untracked record's run", isRun(rec.ExecID, 1))
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	_, r = restartForReload(t, cfg)
	if r["from_index"] != false {
		t.Fatalf("next reload %v: want a scan (the store holds an untracked record)", r)
	}
}

// TestIndexReloadMatchesScan: on one store holding executions in every
// state a reload acts on (delayed PENDING, PENDING due, TRIGGERED, RUNNING,
// RETRY_WAITING, SUCCESS, unplaced), some of each written after a killed
// process's mark, a reload that leans on the index and one that scans arm
// the same retry timers, leave the same executions waiting for an agent,
// check the same records, and re-send and make again nothing.
func TestIndexReloadMatchesScan(t *testing.T) {
	cfg, c1, a := onExternalServer(t, indexReloadConfig)
	ctx := tctx(t)
	a.register()
	var mark time.Time
	for phase := range 2 {
		if phase == 1 {
			mark = c1.now()
		}
		// Most records before the mark, as after a crash long after the
		// bulk was made (else the reload scans: most of the bucket since).
		delayed := []int{30, 2}[phase]
		for range delayed {
			if _, err := c1.CreateJob(ctx, laterJob("edge-1")); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if _, err := c1.CreateJob(ctx, protocol.Job{Name: "nowhere", Handler: "noop", Schedule: schedule.Spec{Asap: true},
				Target: protocol.Target{Group: "site=nowhere"}}); err != nil {
				t.Fatal(err)
			}
		}
		// One asap run left in each state an agent's reports give it.
		for step := range 5 {
			job, err := c1.CreateJob(ctx, retryJob("edge-1", time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			run := a.waitCommand("run 1", isRunOf(job.ID, 1)).Run
			want := protocol.StatePending
			switch step {
			case 1:
				a.publish(a.rep(job.ID, run.ExecID, 1, protocol.ReportTriggered, run.RunAt), "")
				want = protocol.StateTriggered
			case 2:
				a.publish(a.rep(job.ID, run.ExecID, 1, protocol.ReportTriggered, run.RunAt), "")
				a.publish(a.rep(job.ID, run.ExecID, 1, protocol.ReportRunning, run.RunAt), "")
				want = protocol.StateRunning
			case 3:
				a.runAttempt(job.ID, run.ExecID, 1, run.RunAt, retry.OutcomeFailure, transient)
				want = protocol.StateRetryWaiting
			case 4:
				a.runAttempt(job.ID, run.ExecID, 1, run.RunAt, retry.OutcomeSuccess, ok)
				want = protocol.StateSuccess
			}
			waitExec(t, c1, run.ExecID, string(want), inState(want))
		}
	}
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	a.close()

	type outcome struct {
		retries                      map[string]int
		waiting                      int
		checked, resent, made, index any
	}
	reload := func(scanOnly bool) outcome {
		t.Helper()
		leaveDeadMark(t, cfg, mark) // removed by each reload: stored again
		cfg := cfg
		cfg.reloadScanOnly = scanOnly
		c, r := restartForReload(t, cfg)
		defer func() { _ = c.Close() }()
		o := outcome{retries: map[string]int{}, waiting: c.place.Waiting(), checked: r["checked"], resent: r["pending_resent"],
			made: r["one_shot_recreated"], index: r["from_index"]}
		c.retries.mu.Lock()
		for id, e := range c.retries.handles {
			o.retries[id] = e.attempt
		}
		c.retries.mu.Unlock()
		return o
	}
	idx, scan := reload(false), reload(true)
	if idx.index != true || scan.index != false {
		t.Fatalf("from_index: %v and %v; want true, then false", idx.index, scan.index)
	}
	if len(scan.retries) != 2 || scan.waiting != 4 {
		t.Fatalf("scan: %d retry timers, %d waiting; want 2 and 4", len(scan.retries), scan.waiting)
	}
	if !maps.Equal(idx.retries, scan.retries) || idx.waiting != scan.waiting || idx.checked != scan.checked ||
		idx.resent != float64(0) || scan.resent != float64(0) || idx.made != float64(0) || scan.made != float64(0) {
		t.Fatalf("index reload %+v\nscan %+v\nwant the same timers, waiting and checked, nothing re-sent or made", idx, scan)
	}
}
