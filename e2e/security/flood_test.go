package security

import (
	"bytes"
	"context"
	"encoding/json"
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
// report subjects with junk until AX_RPT (reports.max_bytes at its 1 MiB
// minimum) refuses reports. The controller cannot stop a flood (NATS has
// no per-account rate limit; the README says so), but it loses nothing:
//   - on a shard token the controller reads, the junk is rejected as it
//     comes, and another agent's one-shot job created during the flood
//     ends SUCCESS;
//   - on a token nobody reads, the junk stays until the report stream's
//     upkeep purges it (every 10 s): while the stream is full, a job of
//     the other agent stays unfinished at the controller, and it ends
//     SUCCESS after the purge, its reports having waited in the agent's
//     outbox.
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

	// A token no consumer reads: nothing drains the junk but the upkeep.
	unread := protocol.ReportSubject(999, "edge-m")
	refusedSize := func(size int) bool {
		m, err := nc.Request(unread, junk[:size], 10*time.Second)
		if err != nil {
			t.Fatalf("publish on %s: %v", unread, err)
		}
		var ack struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		if err := json.Unmarshal(m.Data, &ack); err != nil {
			t.Fatalf("PubAck %q: %v", m.Data, err)
		}
		return ack.Error != nil
	}
	// Filled to the last few bytes: large junk first, then smaller, so
	// that not even a small report fits.
	full := func() bool { return refusedSize(len(junk)) && refusedSize(1024) && refusedSize(16) }
	for _, size := range []int{len(junk), 1024, 16} {
		testutil.Eventually(t, 60*time.Second, "AX_RPT full of junk on an unread token", func() bool { return refusedSize(size) })
	}
	j, err = s.ctl.CreateJob(testutil.Context(t, 60*time.Second), protocol.Job{Name: "while-full", Handler: "noop",
		Schedule: schedule.Spec{Asap: true}, Target: protocol.Target{Agent: "edge-v"}})
	if err != nil {
		t.Fatalf("create job while AX_RPT is full: %v", err)
	}
	if !full() {
		t.Skip("the upkeep purged the junk before the job's reports could be refused; rerun")
	}
	if succeeded() {
		t.Fatal("an execution reached SUCCESS while AX_RPT refused every report")
	}
	testutil.Eventually(t, 60*time.Second, "the job created while AX_RPT was full in SUCCESS (after the purge)", succeeded)
}
