package agent

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestSkewRefuse: the controller's clock is an hour ahead; with on_skew
// refuse nothing fires, and heartbeats say so.
func TestSkewRefuse(t *testing.T) {
	c := startCtl(t)
	c.skew.Store(int64(time.Hour))
	cfg := testConfig(t, "edge-k", c.srv.URL())
	cfg.Clock.MaxSkew = time.Second
	var runs atomicCounter
	a := startAgent(t, cfg, WithHandler("noop", func(ctx context.Context, tk Task) Result { runs.inc(); return Result{} }))
	j := newJob("edge-k", "noop", schedule.Spec{Every: "20ms"}, nil)
	c.send("edge-k", assignCmd(j))
	c.send("edge-k", runCmd(j, 1, time.Now()))
	var first int
	waitFor(t, 10*time.Second, "a heartbeat with skew_refusing", func() bool {
		n, hb := c.heartbeats()
		first = n
		return hb.Stats.SkewRefusing
	})
	// The job is assigned (cursor advanced past both commands) ...
	waitFor(t, 10*time.Second, "commands applied", func() bool {
		v, _, _ := a.Store().Meta(context.Background(), store.MetaCursor)
		return v == "2"
	})
	// ... and ten more heartbeats (≥ 1 s, fifty periods of the job) later nothing has fired.
	waitFor(t, 10*time.Second, "ten more heartbeats", func() bool { n, _ := c.heartbeats(); return n >= first+10 })
	if n := runs.get(); n != 0 {
		t.Fatalf("%d executions ran under refuse", n)
	}
	cnt, err := a.Store().Counts(context.Background())
	must(t, err)
	if cnt.Triggered+cnt.Running != 0 || c.count(protocol.ReportTriggered) != 0 {
		t.Fatalf("executions triggered under refuse: %+v, %d reports", cnt, c.count(protocol.ReportTriggered))
	}
	// Back within max_skew: firing resumes, the held run included.
	c.skew.Store(0)
	waitFor(t, 10*time.Second, "firing resumes", func() bool { return runs.get() >= 2 })
}
