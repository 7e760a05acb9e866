package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/controller/retention"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// shortWindow is a reports.dedup_window and history.retention of 10m
// (the soak): the live grace is 10m, the history keeps an
// execution 20m after its last change.
func shortWindow(c *Config) {
	c.Reports.DedupWindow = 10 * time.Minute
	c.History.Retention = 10 * time.Minute
}

// TestDedupWindowSetsStreams: reports.dedup_window is the Duplicates of
// AX_RPT, and with history.retention AX_EVT's max age (grace +
// retention); the Duplicates of AX_EVT is twice ack_wait, at least 2m and
// at most reports.dedup_window, AX_CMD's the server's least
// (streams.CommandDuplicates); a restart of an existing store with other
// values updates the streams (down from the defaults and back up).
func TestDedupWindowSetsStreams(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		window, retention, ackWait, evtAge, evtDup time.Duration
	}{
		{0, 0, 0, DefaultDedupWindow + DefaultHistoryRetention, 2 * time.Minute},
		{10 * time.Minute, 10 * time.Minute, 0, 20 * time.Minute, 2 * time.Minute},
		{3 * time.Hour, time.Hour, 5 * time.Minute, 4 * time.Hour, 10 * time.Minute},
		{time.Minute, time.Hour, 0, time.Hour + time.Minute, time.Minute},
		{0, 0, 0, DefaultDedupWindow + DefaultHistoryRetention, 2 * time.Minute},
	} {
		cfg := testConfig(t, dir)
		cfg.Reports.DedupWindow, cfg.History.Retention = tc.window, tc.retention
		if tc.ackWait > 0 {
			cfg.AckWait = tc.ackWait
		}
		c := startController(t, cfg)
		want := tc.window
		if want == 0 {
			want = DefaultDedupWindow
		}
		if g := c.liveGrace(); g != want {
			t.Errorf("dedup_window %v: live grace %v, want %v", tc.window, g, want)
		}
		for _, name := range []string{protocol.StreamCommands, protocol.StreamReports, protocol.StreamEvents} {
			s, err := c.js.Stream(tctx(t), name)
			if err != nil {
				t.Fatal(err)
			}
			info, err := s.Info(tctx(t))
			if err != nil {
				t.Fatal(err)
			}
			wantDup := want
			switch name {
			case protocol.StreamEvents:
				wantDup = tc.evtDup
			case protocol.StreamCommands:
				wantDup = streams.CommandDuplicates
			}
			if info.Config.Duplicates != wantDup {
				t.Errorf("dedup_window %v, ack_wait %v: %s duplicates %v, want %v", tc.window, tc.ackWait, name, info.Config.Duplicates, wantDup)
			}
			if name == protocol.StreamEvents && info.Config.MaxAge != tc.evtAge {
				t.Errorf("dedup_window %v: AX_EVT max age %v, want %v", tc.window, info.Config.MaxAge, tc.evtAge)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetentionShortDedupWindow: with reports.dedup_window 10m and
// history.retention 10m a terminal execution stays in ax_execs 10m after
// its last change, not the 2h default, and its one-shot job leaves
// ax_jobs with it; history keeps the execution until 20m after its last
// change, then lets it go.
func TestRetentionShortDedupWindow(t *testing.T) {
	f := newRetentionFixture(t, shortWindow)
	c, ctx := f.c, tctx(t)
	job, execID := f.oneShot(t)
	f.indexed(t, execID)

	f.clk.step(9 * time.Minute)
	for range 5 {
		if err := c.ret.Sweep(ctx, retention.NewSweeper()); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := c.ex.readExec(ctx, execID); v.Rec == nil {
		t.Fatalf("%s left ax_execs before the 10m grace ended", execID)
	}

	f.clk.step(2 * time.Minute) // 11m
	f.leftLive(t, execID)
	eventually(t, 10*time.Second, "one-shot job gone from ax_jobs", func() bool {
		_, err := c.kv.Jobs.Get(ctx, job.ID)
		return errors.Is(err, jetstream.ErrKeyNotFound)
	})
	eventually(t, 10*time.Second, "no message left in ax_execs", func() bool {
		return len(subjects(t, c, protocol.BucketExecs)) == 0
	})

	f.clk.step(7 * time.Minute) // 18m: within grace + retention
	for range 5 {
		if err := c.ret.Sweep(ctx, retention.NewSweeper()); err != nil {
			t.Fatal(err)
		}
	}
	if e, err := c.GetExecution(ctx, execID); err != nil || e.State != protocol.StateSuccess {
		t.Fatalf("GetExecution from history at 18m = %+v, %v", e, err)
	}

	f.clk.step(3 * time.Minute) // 21m
	eventually(t, 10*time.Second, "execution pruned from history", func() bool {
		_, err := c.GetExecution(ctx, execID)
		return errors.Is(err, ErrNotFound)
	})
	f.clk.step(2 * time.Minute) // retired at 11m: its row goes 10m later
	eventually(t, 10*time.Second, "retired job pruned from history", func() bool {
		r, _, err := c.ListJobs(ctx, JobFilter{Retired: true})
		return err == nil && len(r) == 0
	})
}

// TestRetentionShortWindowReplayRefused: with a 10m dedup window a report
// replayed after the execution left live state (11m: past the stream's
// window, so the stream does not drop it; the replay uses new Msg-Ids) is
// refused from the history index, for a periodic fire and a one-shot
// alike: no record comes back in ax_execs. inHistory's shortcut (half
// the grace) must follow the configured grace, not the 2h default.
func TestRetentionShortWindowReplayRefused(t *testing.T) {
	f := newRetentionFixture(t, shortWindow)
	c, ctx := f.c, tctx(t)
	// Every 1m: the fire (at CreatedAt+1m, run early by the test agent) is
	// scheduled more than half the grace before the replay.
	per, err := c.CreateJob(ctx, everyJob("edge-1", "1m"))
	if err != nil {
		t.Fatal(err)
	}
	f.a.waitCommand("assign", isAssign(per.ID, 1))
	fired, at := f.fire(t, per)
	job, execID := f.oneShot(t)
	f.indexed(t, fired)
	f.indexed(t, execID)
	f.clk.step(11 * time.Minute)
	f.leftLive(t, fired)
	f.leftLive(t, execID)

	dup := testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(ingest.RejectDuplicate))
	f.replay(per.ID, fired, at)
	f.replay(job.ID, execID, job.CreatedAt)
	eventually(t, 10*time.Second, "six replayed reports refused as duplicates", func() bool {
		return testutil.MetricValue(t, c.m.reportsRejected.WithLabelValues(ingest.RejectDuplicate))-dup == 6
	})
	for _, id := range []string{fired, execID} {
		if v, err := c.ex.readExec(context.Background(), id); err != nil || v.Rec != nil {
			t.Fatalf("%s is back in ax_execs: %+v, %v", id, v.Rec, err)
		}
		if e, err := c.GetExecution(ctx, id); err != nil || e.State != protocol.StateSuccess {
			t.Fatalf("history of %s changed: %+v, %v", id, e, err)
		}
	}
}
