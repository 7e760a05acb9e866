package agent

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestReportsRefusedPerSubject: while no controller reads AX_RPT, the
// stream takes at most ReportMaxPerSubject reports of one agent and shard
// and refuses the rest; the agent keeps those in its outbox and publishes
// them again until they are taken, so once the reports are read again
// every execution's finished report arrives, each taken once.
func TestReportsRefusedPerSubject(t *testing.T) {
	c := startCtl(t)
	c.consumer.Stop()
	ctx := testutil.Context(t, 60*time.Second)
	const perSubject = streams.MinReportMaxPerSubject
	if _, err := streams.Ensure(ctx, c.js, streams.Config{ReportMaxPerSubject: perSubject}); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, "edge-r", c.srv.URL())
	cfg.Outbox.Linger = 0 // each report on its own: more of them than executions
	a := startAgent(t, cfg, WithHandler("noop", func(context.Context, Task) Result { return Result{} }))
	waitFor(t, 10*time.Second, "registered", func() bool { n, _ := c.heartbeats(); return n > 0 })

	// One job: every report goes to the same shard, one subject.
	j := newJob("edge-r", "noop", schedule.Spec{Asap: true}, nil)
	j.Concurrency = 1024
	const runs = 3 * perSubject
	base := time.Now().Add(-time.Hour)
	execs := make([]string, runs)
	for i := range runs {
		cmd := runCmd(j, 1, base.Add(time.Duration(i)*time.Millisecond))
		execs[i] = cmd.Run.ExecID
		c.send("edge-r", cmd)
	}
	st, err := c.js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	subject := protocol.ReportSubject(protocol.Shard(j.ID, ctlShards), "edge-r")
	held := func() uint64 {
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(subject))
		if err != nil {
			return 0
		}
		return info.State.Subjects[subject]
	}
	waitFor(t, 30*time.Second, "the agent's subject full", func() bool { return held() == perSubject })
	waitFor(t, 30*time.Second, "the refused reports kept in the outbox", func() bool {
		n, err := a.st.Counts(ctx)
		return err == nil && n.Outbox > 0 && n.Pending+n.Triggered+n.Running == 0
	})

	c.consume()
	waitFor(t, 60*time.Second, "every execution's finished report", func() bool {
		for _, id := range execs {
			if _, ok := finishedOf(c, id); !ok {
				return false
			}
		}
		return true
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, n := range c.msgIDs {
		if n > 1 {
			t.Errorf("report %s taken %d times", id, n)
		}
	}
}
