package security

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestReportFloodLosesNothing: an enrolled agent's key floods its own
// report subject with junk until AX_RPT (reports.max_bytes at its 1 MiB
// minimum) refuses reports, and keeps flooding while a one-shot job of
// another agent is created. The controller cannot stop a flood (NATS has
// no per-account rate limit; the README says so), but it loses nothing:
// the junk is rejected as it is read, and the other agent's execution
// ends SUCCESS (a report refused while the stream is full waits in the
// agent's outbox). On a shard token no consumer reads, the junk is not
// even stored: AX_RPT does not take that subject.
func TestReportFloodLosesNothing(t *testing.T) {
	dir := t.TempDir()
	s := startStack(t, dir, -1, func(c *controller.Config) { c.Reports.MaxBytes = 1 << 20 })
	url := s.ctl.NATSURL()
	runAgent(t, "edge-v", url, s.enroll(t, "edge-v", auth.EnrollRequest{}))
	testutil.Eventually(t, 30*time.Second, "edge-v online", online(s, "edge-v"))
	runJob(t, s, "edge-v", "before-the-flood")

	nc, err := connectRaw(url, s.enroll(t, "edge-m", auth.EnrollRequest{}))
	if err != nil {
		t.Fatalf("attacker's connection: %v", err)
	}
	defer nc.Close()
	var refused atomic.Int64
	if _, err := nc.Subscribe("_INBOX.flood.*", func(m *nats.Msg) {
		var ack struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if json.Unmarshal(m.Data, &ack) == nil && ack.Error != nil {
			refused.Add(1)
		}
	}); err != nil {
		t.Fatal(err)
	}
	junk := bytes.Repeat([]byte("x"), 60<<10)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m := &nats.Msg{Subject: protocol.ReportSubject(0, "edge-m"), Reply: "_INBOX.flood." + strconv.Itoa(i), Data: junk}
			if err := nc.PublishMsg(m); err != nil {
				return
			}
			if i%32 == 31 {
				_ = nc.FlushTimeout(5 * time.Second)
			}
		}
	}()
	stopFlood := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopFlood()

	testutil.Eventually(t, 60*time.Second, "AX_RPT full: the flood's reports refused", func() bool { return refused.Load() > 0 })
	j, err := s.ctl.CreateJob(testutil.Context(t, 60*time.Second), protocol.Job{Name: "during-the-flood", Handler: "noop",
		Schedule: schedule.Spec{Asap: true}, Target: protocol.Target{Agent: "edge-v"}})
	if err != nil {
		t.Fatalf("create job during the flood: %v", err)
	}
	r0 := refused.Load()
	testutil.Eventually(t, 60*time.Second, "AX_RPT still refusing after the job was created", func() bool { return refused.Load() >= r0+200 })
	succeeded := func() bool {
		es, _, err := s.ctl.ListExecutions(context.Background(), controller.ExecFilter{JobID: j.ID, Limit: 10})
		return err == nil && slices.ContainsFunc(es, func(e protocol.Execution) bool { return e.State == protocol.StateSuccess })
	}
	during := succeeded()
	stopFlood()
	t.Logf("flood: %d reports refused; the job's execution was SUCCESS before the flood stopped: %v", refused.Load(), during)
	testutil.Eventually(t, 60*time.Second, "the job created during the flood in SUCCESS", succeeded)
	runJob(t, s, "edge-v", "after-the-flood")

	// A token no consumer reads: AX_RPT does not take it, so junk there is
	// stored nowhere and its publisher is told at once.
	unread := protocol.ReportSubject(999, "edge-m")
	for range 3 {
		if _, err := nc.Request(unread, junk, 10*time.Second); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("publish on %s: %v, want no responders (no stream takes it)", unread, err)
		}
	}
}
