package controller

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/writemark"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// leaveDeadMark stores the write mark a killed process of c's node would
// have left with an op open since through: the records such a process
// wrote at or after through may lack their command or events. Tests that
// write a record by hand to stand for one a crash cut short call it, since
// a record of a process that ended cleanly is known to have its effects.
func leaveDeadMark(t testing.TB, cfg Config, through time.Time) {
	t.Helper()
	data, err := writemark.Encode(writemark.Value{Node: cfg.Node, Instance: "dead00000000", Through: through, Open: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := marksKV(t, cfg.NATS.URL).Put(tctx(t), writemark.Key(cfg.Node, "dead00000000"), data); err != nil {
		t.Fatal(err)
	}
}

// marksKV opens ax_marks on the server at url, on a connection of the
// test's own.
func marksKV(t testing.TB, url string) jetstream.KeyValue {
	t.Helper()
	nc, js := natstest.Connect(t, url)
	t.Cleanup(nc.Close)
	kv, err := js.KeyValue(tctx(t), protocol.BucketMarks)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// restartForReload starts a controller on cfg (a store another one left)
// with its log captured, and returns it with the fields of its first
// "executions reloaded" line.
func restartForReload(t testing.TB, cfg Config) (*Controller, map[string]any) {
	t.Helper()
	c, r, _ := restartForReloadLogs(t, cfg)
	return c, r
}

// restartForReloadLogs is restartForReload, also returning the log.
func restartForReloadLogs(t testing.TB, cfg Config) (*Controller, map[string]any, *testutil.Buffer) {
	t.Helper()
	logs := &testutil.Buffer{}
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	cfg.Registry = nil
	c := startController(t, cfg)
	return c, waitLogRecord(t, 20*time.Second, logs, "executions reloaded", nil), logs
}

// pendingRecord is the PENDING record of execution (jobID, at) on agent
// edge-1 as a create at at makes it, for tests that store by hand what a
// crash or an earlier version left.
func pendingRecord(t testing.TB, jobID string, at time.Time) *execRecord {
	t.Helper()
	rec, _, err := execution.Apply(nil, execution.Create{ExecID: protocol.ExecID(jobID, at), JobID: jobID, Agent: "edge-1",
		ScheduledAt: at, Reason: "scheduled"}, execution.Env{Now: at})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// putUntrackedRecord stores the PENDING record of execution (jobID, at)
// on edge-1 as an earlier version stored it (no "tracked"), whose run
// never went out, and returns it.
func putUntrackedRecord(t testing.TB, c *Controller, jobID string, at time.Time) *execRecord {
	t.Helper()
	rec := pendingRecord(t, jobID, at)
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "tracked") {
		t.Fatalf("hand-made record %s is tracked", data)
	}
	if _, err := c.kv.Execs.Create(tctx(t), rec.ExecID, data); err != nil {
		t.Fatal(err)
	}
	return rec
}

// markKeys returns the processes' keys of ax_marks on the server at url
// (not VerifiedKey), sorted.
func markKeys(t testing.TB, url string) []string {
	t.Helper()
	keys, err := marksKV(t, url).Keys(tctx(t))
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		t.Fatal(err)
	}
	keys = slices.DeleteFunc(keys, func(k string) bool { return k == writemark.VerifiedKey })
	slices.Sort(keys)
	return keys
}

// TestReloadChecksOnlyRecordsAfterTheMarks: after a clean stop, a restart
// reads no run command back and checks no record (every record was
// written with its effects); with a killed process's mark older than the
// records, it checks them all, finds their runs in AX_CMD and re-sends
// none, then removes that mark (a process of its own node).
func TestReloadChecksOnlyRecordsAfterTheMarks(t *testing.T) {
	cfg, c1, a := onExternalServer(t, func(cfg *Config) { cfg.marksMargin = time.Nanosecond })
	ctx := tctx(t)
	a.register()
	const n = 5
	for range n {
		if _, err := c1.CreateJob(ctx, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"},
			Target: protocol.Target{Agent: "edge-1"}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "five runs sent", func() bool { return len(a.commands()) >= n })
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	if keys := markKeys(t, cfg.NATS.URL); len(keys) != 0 {
		t.Fatalf("ax_marks after a clean stop: %v, want no key (the process ended with its effects stored)", keys)
	}

	restart := func(what string) map[string]any {
		t.Helper()
		c, r := restartForReload(t, cfg)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v", what, r)
		return r
	}
	r := restart("after a clean stop")
	if r["pending"] != float64(n) || r["checked"] != float64(0) || r["unchecked"] != float64(n) || r["pending_resent"] != float64(0) {
		t.Errorf("reload after a clean stop %v: want %d pending, none checked, %d unchecked, none re-sent", r, n, n)
	}

	leaveDeadMark(t, cfg, time.Now().Add(-time.Hour))
	r = restart("with a killed process's mark an hour old")
	if r["checked"] != float64(n) || r["pending_resent"] != float64(0) || r["dead_marks_removed"] != float64(1) || r["write_marks"] != float64(2) {
		t.Errorf("reload with a dead mark %v: want %d checked, none re-sent (AX_CMD holds them), 2 marks read, 1 removed", r, n)
	}
	if keys := markKeys(t, cfg.NATS.URL); len(keys) != 0 {
		t.Errorf("ax_marks after the reload and a clean stop: %v, want none", keys)
	}
}

// TestKilledProcessLeavesItsMark: a process that dies (no clean stop)
// leaves its key with a mark no later than its last write; the next
// process of the node removes it once its reload has checked every shard.
func TestKilledProcessLeavesItsMark(t *testing.T) {
	cfg, c1, a := onExternalServer(t, nil)
	ctx := tctx(t)
	a.register()
	before := c1.now()
	if _, err := c1.CreateJob(ctx, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"},
		Target: protocol.Target{Agent: "edge-1"}}); err != nil {
		t.Fatal(err)
	}
	key := c1.marksKey()
	c1.abandon()
	e, err := marksKV(t, cfg.NATS.URL).Get(ctx, key)
	if err != nil {
		t.Fatalf("mark of the killed process: %v", err)
	}
	v, err := writemark.Decode(e.Value())
	if err != nil {
		t.Fatal(err)
	}
	if v.Through.Before(before.Add(-time.Minute)) || v.Instance != c1.instance {
		t.Errorf("killed process's mark %+v: want its own, through at most a minute before %v", v, before)
	}
	c2, r := restartForReload(t, cfg)
	if r["dead_marks_removed"] != float64(1) {
		t.Errorf("reload %v: want the killed process's mark removed", r)
	}
	if keys := markKeys(t, cfg.NATS.URL); !slices.Equal(keys, []string{c2.marksKey()}) {
		t.Errorf("ax_marks after the reload: %v, want only %s", keys, c2.marksKey())
	}
}

// TestFailedEffectHoldsTheMark: an operator's cancel whose cancel command
// cannot be stored (AX_CMD gone) fails its write op: the mark stays at the
// op's begin, counted in ax_write_ops_failed, for the life of the process.
func TestFailedEffectHoldsTheMark(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	j, err := c.CreateJob(ctx, protocol.Job{Name: "later", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"},
		Target: protocol.Target{Agent: "edge-1"}})
	if err != nil {
		t.Fatal(err)
	}
	execID := a.waitCommand("run", func(cmd protocol.Command) bool { return cmd.Kind == protocol.CmdRun && cmd.Run.Job.ID == j.ID }).Run.ExecID
	// The create's op ends once its held PENDING event is published (eventhold.go).
	eventually(t, 10*time.Second, "no op open after the create", func() bool { return c.marks.Mark().Open == 0 })
	if err := c.js.DeleteStream(ctx, protocol.StreamCommands); err != nil {
		t.Fatal(err)
	}
	at := c.now()
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := c.CancelExecution(cctx, execID); err == nil {
		t.Fatal("cancel with AX_CMD gone: nil error, want the cancel command's failure")
	}
	m := c.marks.Mark()
	if m.Failed != 1 || m.Through.Before(at) || m.Through.After(c.now()) {
		t.Errorf("after the failed cancel: %+v, want 1 failed op holding the mark at its begin (at or after %v)", m, at)
	}
	eventually(t, 10*time.Second, "the failed op counted and stored", func() bool {
		e, err := c.kv.Marks.Get(ctx, c.marksKey())
		if err != nil {
			return false
		}
		v, err := writemark.Decode(e.Value())
		return err == nil && v.Failed == 1 && v.Through.Equal(m.Through) && testutil.MetricValue(t, c.m.marksFailed) == 1
	})
}

// TestSweepRestoresRunOfEndedReplica: replica b writes a PENDING record
// for a job on a shard replica a works (an API create it answered) and is
// killed before the run goes out. No takeover reloads that shard (a owned
// it all along); a's sweep of the ended process's mark does: the run
// reaches the agent, and b's mark, checked on every shard once a owns
// them all, is removed.
func TestSweepRestoresRunOfEndedReplica(t *testing.T) {
	srv := natstest.Start(t)
	adjust := func(cfg *Config) Config {
		cfg.marksSweep = 200 * time.Millisecond
		return *cfg
	}
	ca := replicaConfig(t, srv.URL(), "ctl-a", 2*time.Second)
	a := startController(t, adjust(&ca))
	cb := replicaConfig(t, srv.URL(), "ctl-b", 2*time.Second)
	b := startController(t, adjust(&cb))
	eventually(t, 10*time.Second, "8 shards each", func() bool {
		return len(a.own.OwnedShards()) == 8 && len(b.own.OwnedShards()) == 8
	})
	ag := newTestAgent(t, srv.URL(), "edge-1", nil).start()
	ctx := tctx(t)
	// A job id on a shard a works, its record written by b under a write
	// op that never ends (b dies before sending the run).
	var jobID string
	for i := uint32(1); ; i++ {
		jobID = protocol.NewJobID("ctl-b", b.now(), i)
		if a.own.Owns(a.own.ShardOf(jobID)) {
			break
		}
	}
	j := protocol.Job{ID: jobID, Name: "lost", Handler: "noop", Schedule: schedule.Spec{Delay: "1h"},
		Target: protocol.Target{Agent: "edge-1"}, CreatedAt: b.now(), Generation: 1}
	data, err := protocol.Encode(j)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.kv.Jobs.Create(ctx, jobID, data); err != nil {
		t.Fatal(err)
	}
	at := b.now().Add(time.Hour)
	octx, op := b.marks.Begin(ctx)
	_, rec, _, err := b.ex.createExec(octx, execution.Create{ExecID: protocol.ExecID(jobID, at), JobID: jobID, Agent: "edge-1", ScheduledAt: at, Reason: "scheduled"})
	if err != nil {
		t.Fatal(err)
	}
	_ = op // never ended: b is killed with it open
	eventually(t, 10*time.Second, "b's mark stored with the op open", func() bool {
		e, err := a.kv.Marks.Get(ctx, b.marksKey())
		if err != nil {
			return false
		}
		v, err := writemark.Decode(e.Value())
		return err == nil && v.Open == 1 && !v.Through.After(rec.UpdatedAt)
	})
	if len(ag.commands()) != 0 {
		t.Fatalf("commands before the kill: %v, want none", ag.commands())
	}
	b.abandon()
	run := ag.waitCommand("the lost run, re-sent by a", isRun(rec.ExecID, 1))
	if run.Run.Job.ID != jobID {
		t.Fatalf("run %+v, want job %s", run.Run, jobID)
	}
	eventually(t, 20*time.Second, "b's mark removed once a owns and checked every shard", func() bool {
		keys := markKeys(t, srv.URL())
		return len(a.own.OwnedShards()) == a.cfg.Shards && slices.Equal(keys, []string{a.marksKey()})
	})
}

// TestReloadCreatesMissingOneShotAfterMark: a one-shot job stored without
// its execution (CreateJob killed between the two) is given it by the
// next start's reload when the killed process's mark is older than the
// job; a generation-1 one-shot job created before every mark is not
// looked at (its create completed), which is what keeps the reload from
// parsing 300,000 schedules.
func TestReloadCreatesMissingOneShotAfterMark(t *testing.T) {
	cfg, c1, a := onExternalServer(t, nil)
	ctx := tctx(t)
	a.register()
	store := func(name string, created time.Time, rnd uint32) string {
		j := protocol.Job{ID: protocol.NewJobID(cfg.Node, created, rnd), Name: name, Handler: "noop",
			Schedule: schedule.Spec{Delay: "1h"}, Target: protocol.Target{Agent: "edge-1"}, CreatedAt: created, Generation: 1}.WithDefaults()
		data, err := protocol.Encode(j)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c1.kv.Jobs.Create(ctx, j.ID, data); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	now := c1.now()
	before := store("before the mark", now.Add(-time.Hour), 1)
	after := store("after the mark", now.Add(-time.Minute), 2)
	leaveDeadMark(t, cfg, now.Add(-30*time.Minute)) // the process killed in the second create
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	_, r := restartForReload(t, cfg)
	if r["one_shot_recreated"] != float64(1) {
		t.Errorf("reload %v: want 1 one-shot execution created (the job stored after the mark)", r)
	}
	run := a.waitCommand("run of the job stored after the mark", func(c protocol.Command) bool {
		return c.Kind == protocol.CmdRun && c.Run.Job.ID == after
	})
	for _, c := range a.commands() {
		if c.Kind == protocol.CmdRun && c.Run.Job.ID == before {
			t.Errorf("run of the job created before every mark: %+v, want none (not looked at)", c.Run)
		}
	}
	t.Logf("re-created %s", run.Run.ExecID)
}

// TestUntrackedRecordsCheckedOnce: the records an earlier version wrote
// (no "tracked") are checked by the first reload of every shard, which
// re-sends a lost run and stores how far they are checked; the next
// restart checks none of them, and scans: with such a record stored the
// history index does not stand in for the scan.
func TestUntrackedRecordsCheckedOnce(t *testing.T) {
	cfg, c1, a := onExternalServer(t, func(cfg *Config) { cfg.marksMargin = time.Nanosecond })
	ctx := tctx(t)
	a.register()
	j, err := c1.CreateJob(ctx, laterJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	a.waitCommand("the job's own run", isRunOf(j.ID, 0))
	// A second execution of the job as an earlier version stored it (no
	// "tracked"), whose run never went out.
	rec := putUntrackedRecord(t, c1, j.ID, c1.now().Add(-time.Minute))
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	// The store as the upgrade finds it: no reload of this version has
	// checked the earlier one's records yet (c1's start stored its own
	// check, of an empty store, before the record was written).
	if err := marksKV(t, cfg.NATS.URL).Delete(ctx, writemark.VerifiedKey); err != nil {
		t.Fatal(err)
	}
	c2, r := restartForReload(t, cfg)
	if r["checked"] != float64(1) || r["unchecked"] != float64(1) || r["pending_resent"] != float64(1) || r["untracked_verified"] != true {
		t.Errorf("first reload %v: want the untracked record checked and its run re-sent, the tracked one not, the check stored", r)
	}
	a.waitCommand("the lost run, re-sent", isRun(rec.ExecID, 1))
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	_, r = restartForReload(t, cfg)
	if r["checked"] != float64(0) || r["unchecked"] != float64(2) || r["pending_resent"] != float64(0) {
		t.Errorf("second reload %v: want nothing checked (the untracked record checked by the first)", r)
	}
	// A store holding a record of an earlier version is scanned: the
	// history index never stands in for it (reloadindex.go).
	if r["from_index"] != false {
		t.Errorf("second reload %v: want a scan (an untracked record is stored)", r)
	}
	v, err := marksKV(t, cfg.NATS.URL).Get(ctx, writemark.VerifiedKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := writemark.DecodeVerified(v.Value()); err != nil || got.None {
		t.Errorf("%s = %+v, %v; want None false", writemark.VerifiedKey, got, err)
	}
}
