package security

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// TestReportForAnotherAgentsExecution: agent M, on its own report subject
// (the only one NATS lets it use), claims to finish executions that belong
// to agent B — once naming B in the body, once naming itself. NATS
// permissions cannot see the payload: the controller has to bind a report
// to the agent of its subject and to the agent of the execution.
//
// The controller rejects both (reason wrong_agent): controller/ingest/lanes.go
// binds the body's agent to the subject, controller/execution the report's agent to
// the agent of the attempt.
func TestReportForAnotherAgentsExecution(t *testing.T) {
	dir := t.TempDir()
	s := startStack(t, dir, -1)
	url := s.ctl.NATSURL()
	s.enroll(t, "edge-b", auth.EnrollRequest{})
	mSeed := s.enroll(t, "edge-m", auth.EnrollRequest{})

	opt, err := nats.NkeyOptionFromSeed(mSeed)
	if err != nil {
		t.Fatal(err)
	}
	_, js := natstest.JetStream(t, url, opt, nats.CustomInboxPrefix(protocol.InboxPrefix("edge-m")))
	// The controller's own identity, to see when the reports are consumed.
	adminOpt, err := nats.NkeyOptionFromSeed(filepath.Join(dir, controller.AuthDir, auth.ControllerSeedFile))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := nats.Connect(url, adminOpt)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ajs, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}

	for _, claim := range []string{"edge-b", "edge-m"} {
		t.Run("body names "+claim, func(t *testing.T) {
			// B is not running: its execution stays PENDING.
			j, err := s.ctl.CreateJob(testutil.Context(t, 60*time.Second), protocol.Job{Name: "bjob-" + claim, Handler: "noop",
				Schedule: schedule.Spec{Asap: true}, Target: protocol.Target{Agent: "edge-b"}})
			if err != nil {
				t.Fatal(err)
			}
			var execID string
			testutil.Eventually(t, 30*time.Second, "B's execution", func() bool {
				es, _, err := s.ctl.ListExecutions(context.Background(), controller.ExecFilter{JobID: j.ID, Limit: 10})
				if err == nil && len(es) > 0 {
					execID = es[0].ExecID
				}
				return execID != ""
			})
			now := time.Now().UTC()
			r := protocol.Report{V: protocol.Version, Agent: claim, JobID: j.ID, ExecID: execID, Attempt: 1,
				Kind: protocol.ReportFinished, ScheduledAt: j.CreatedAt, At: now, Outcome: retry.OutcomeSuccess,
				Result: &retry.Result{}, TriggeredAt: now, StartedAt: now}
			data, err := protocol.Encode(r)
			if err != nil {
				t.Fatal(err)
			}
			subj := protocol.ReportSubject(protocol.Shard(j.ID, protocol.DefaultShards), "edge-m")
			if _, err := js.Publish(testutil.Context(t, 60*time.Second), subj, data, jetstream.WithMsgID(r.MsgID())); err != nil {
				t.Fatalf("M's report on its own subject: %v", err)
			}
			testutil.Eventually(t, 30*time.Second, "the report consumed", func() bool {
				st, err := ajs.Stream(context.Background(), protocol.StreamReports)
				return err == nil && st.CachedInfo().State.Msgs == 0
			})
			e, err := s.ctl.GetExecution(testutil.Context(t, 60*time.Second), execID)
			if err != nil {
				t.Fatal(err)
			}
			if e.State != protocol.StatePending {
				t.Errorf("agent edge-m moved edge-b's execution to %s (recorded agent %q)", e.State, e.Agent)
			}
		})
	}
}
