package security

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// reflectEnv is a controller with nats.auth: nkeys, a victim agent edge-b
// (enrolled, not running) with a job, an execution and a command, the
// attacker edge-x connected with only its own key and inbox prefix, and
// the controller's own connection to look at the ax account.
type reflectEnv struct {
	s      *stack
	x      *nats.Conn
	admin  jetstream.JetStream
	job    protocol.Job
	execID string
	// snapshot of what the attacks must not change
	jobRev, execRev    uint64
	agentBRev          uint64 // edge-b's ax_agents record as its enrollment wrote it
	cmdsB, rptConsumer string
}

func newReflectEnv(t *testing.T) *reflectEnv {
	t.Helper()
	dir := t.TempDir()
	s := startStack(t, dir, -1)
	url := s.ctl.NATSURL()
	s.enroll(t, "edge-b", auth.EnrollRequest{})
	xSeed := s.enroll(t, "edge-x", auth.EnrollRequest{})
	e := &reflectEnv{s: s}
	ctx := testutil.Context(t, 60*time.Second)
	var err error
	e.job, err = s.ctl.CreateJob(ctx, protocol.Job{Name: "victim", Handler: "noop",
		Schedule: schedule.Spec{Asap: true}, Target: protocol.Target{Agent: "edge-b"}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "edge-b's execution", func() bool {
		es, _, err := s.ctl.ListExecutions(context.Background(), controller.ExecFilter{JobID: e.job.ID, Limit: 10})
		if err == nil && len(es) > 0 {
			e.execID = es[0].ExecID
		}
		return e.execID != ""
	})
	adminOpt, err := nats.NkeyOptionFromSeed(filepath.Join(dir, controller.AuthDir, auth.ControllerSeedFile))
	if err != nil {
		t.Fatal(err)
	}
	anc, err := nats.Connect(url, adminOpt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(anc.Close)
	if e.admin, err = jetstream.New(anc); err != nil {
		t.Fatal(err)
	}
	xOpt, err := nats.NkeyOptionFromSeed(xSeed)
	if err != nil {
		t.Fatal(err)
	}
	if e.x, err = nats.Connect(url, xOpt, nats.CustomInboxPrefix(protocol.InboxPrefix("edge-x")),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.x.Close)
	e.jobRev = e.rev(t, protocol.BucketJobs, e.job.ID)
	e.execRev = e.rev(t, protocol.BucketExecs, e.execID)
	e.agentBRev = e.rev(t, protocol.BucketAgents, "edge-b")
	e.cmdsB = e.count(t, protocol.StreamCommands, protocol.CommandSubject("edge-b"))
	rst, err := e.admin.Stream(ctx, protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	names := rst.ConsumerNames(ctx)
	for n := range names.Name() {
		e.rptConsumer = n
		break
	}
	if e.rptConsumer == "" {
		t.Fatal("no report consumer")
	}
	return e
}

func (e *reflectEnv) rev(t *testing.T, bucket, key string) uint64 {
	t.Helper()
	kv, err := e.admin.KeyValue(testutil.Context(t, 10*time.Second), bucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", bucket, err)
	}
	en, err := kv.Get(testutil.Context(t, 10*time.Second), key)
	if err != nil {
		t.Fatalf("%s/%s: %v", bucket, key, err)
	}
	return en.Revision()
}

// count returns "stream/subject: n" for the messages of subject in stream.
func (e *reflectEnv) count(t *testing.T, stream, subject string) string {
	t.Helper()
	st, err := e.admin.Stream(testutil.Context(t, 10*time.Second), stream)
	if err != nil {
		return fmt.Sprintf("%s: %v", stream, err)
	}
	info, err := st.Info(testutil.Context(t, 10*time.Second), jetstream.WithSubjectFilter(subject))
	if err != nil {
		return fmt.Sprintf("%s: %v", stream, err)
	}
	return fmt.Sprintf("%s/%s: %d", stream, subject, info.State.Subjects[subject])
}

// target is a subject in the ax account that a reflected message must not
// reach, and the check that it did not.
type target struct {
	subject string
	check   func(t *testing.T, e *reflectEnv)
}

func (e *reflectEnv) targets() []target {
	unchanged := func(bucket, key string, rev uint64) func(*testing.T, *reflectEnv) {
		return func(t *testing.T, e *reflectEnv) {
			if got := e.rev(t, bucket, key); got != rev {
				t.Errorf("%s/%s: revision %d, was %d: overwritten", bucket, key, got, rev)
			}
		}
	}
	return []target{
		{"$KV." + protocol.BucketJobs + "." + e.job.ID, unchanged(protocol.BucketJobs, e.job.ID, e.jobRev)},
		{"$KV." + protocol.BucketExecs + "." + e.execID, unchanged(protocol.BucketExecs, e.execID, e.execRev)},
		{"$KV." + protocol.BucketAgents + ".edge-b", unchanged(protocol.BucketAgents, "edge-b", e.agentBRev)},
		{protocol.EventSubject(protocol.StateFailed, e.job.ID), func(t *testing.T, e *reflectEnv) {
			subj := protocol.EventSubject(protocol.StateFailed, e.job.ID)
			if got, want := e.count(t, protocol.StreamEvents, subj), protocol.StreamEvents+"/"+subj+": 0"; got != want {
				t.Errorf("fake event stored: %s", got)
			}
		}},
		{protocol.CommandSubject("edge-b"), func(t *testing.T, e *reflectEnv) {
			if got := e.count(t, protocol.StreamCommands, protocol.CommandSubject("edge-b")); got != e.cmdsB {
				t.Errorf("junk in edge-b's commands: %s, was %s", got, e.cmdsB)
			}
		}},
		{"$JS.API.STREAM.PURGE.KV_" + protocol.BucketJobs, unchanged(protocol.BucketJobs, e.job.ID, e.jobRev)},
		{"$JS.API.STREAM.DELETE." + protocol.StreamEvents, func(t *testing.T, e *reflectEnv) {
			if _, err := e.admin.Stream(testutil.Context(t, 10*time.Second), protocol.StreamEvents); err != nil {
				t.Errorf("AX_EVT: %v", err)
			}
		}},
		{"$JS.API.CONSUMER.DELETE." + protocol.StreamReports + "." + e.rptConsumer, func(t *testing.T, e *reflectEnv) {
			if _, err := e.admin.Consumer(testutil.Context(t, 10*time.Second), protocol.StreamReports, e.rptConsumer); err != nil {
				t.Errorf("report consumer %s: %v", e.rptConsumer, err)
			}
		}},
	}
}

// reflect sends one request per target through send (the request's reply
// is the target), expects each reply to arrive on the target subject in
// the agent's own account, and then checks the ax account.
func (e *reflectEnv) reflect(t *testing.T, send func(reply string) error) {
	t.Helper()
	tg := e.targets()
	subs := make([]*nats.Subscription, len(tg))
	for i, g := range tg {
		sub, err := e.x.SubscribeSync(g.subject)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		subs[i] = sub
	}
	if err := e.x.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, g := range tg {
		if err := send(g.subject); err != nil {
			t.Fatalf("send with reply %s: %v", g.subject, err)
		}
	}
	for i, g := range tg {
		// The reply arriving here, in the agent's account, is the proof
		// that it went nowhere else: a message is delivered in one account.
		if _, err := subs[i].NextMsg(5 * time.Second); err != nil {
			t.Errorf("the reply sent to %s did not come back to the agent's own account: %v", g.subject, err)
		}
	}
	for _, g := range tg {
		g.check(t, e)
	}
}

// TestReflectionThroughControllerReplies: edge-x's registration and
// heartbeat requests name ax-account subjects (KV keys of ax_jobs,
// ax_execs, ax_agents, a FAILED event, edge-b's command subject, the
// stream purge/delete and consumer delete API) as their reply. The
// controller's answers land in edge-x's own account; nothing in the ax
// account changes.
func TestReflectionThroughControllerReplies(t *testing.T) {
	e := newReflectEnv(t)
	for _, subj := range []string{protocol.RegisterSubject("edge-x"), protocol.HeartbeatSubject("edge-x")} {
		t.Run(subj, func(t *testing.T) {
			e.reflect(t, func(reply string) error { return e.x.PublishRequest(subj, reply, []byte(`{}`)) })
		})
	}
}

// TestReflectionThroughPubAcks: edge-x's reports name ax-account subjects
// as their reply; JetStream's PubAcks land in edge-x's own account.
func TestReflectionThroughPubAcks(t *testing.T) {
	e := newReflectEnv(t)
	e.reflect(t, func(reply string) error {
		return e.x.PublishRequest(protocol.ReportSubject(0, "edge-x"), reply, []byte(`{"v":1}`))
	})
}

// TestReflectionThroughPullStatuses: edge-x pulls from its own (correctly
// filtered) consumer of AX_CMD with no_wait; the empty "no messages"
// status goes to the pull's reply subject, which stays in edge-x's account.
func TestReflectionThroughPullStatuses(t *testing.T) {
	e := newReflectEnv(t)
	name := protocol.CommandConsumerPrefix("edge-x") + "probe"
	resp := e.createConsumer(t, name, nil)
	if strings.Contains(resp, `"error"`) {
		t.Fatalf("edge-x's own pull consumer refused: %s", resp)
	}
	e.reflect(t, func(reply string) error {
		return e.x.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+protocol.StreamCommands+"."+name, reply, []byte(`{"batch":1,"no_wait":true}`))
	})
}

// TestPushConsumerRefused: edge-x asks for a consumer of its own commands
// that pushes to an ax-account subject (with idle heartbeats, whose empty
// body the stream purge API accepts). It is refused, naming the field,
// and no such consumer exists.
func TestPushConsumerRefused(t *testing.T) {
	e := newReflectEnv(t)
	for i, g := range e.targets() {
		name := fmt.Sprintf("%spush%d", protocol.CommandConsumerPrefix("edge-x"), i)
		resp := e.createConsumer(t, name, map[string]any{"deliver_subject": g.subject, "idle_heartbeat": int64(100 * time.Millisecond)})
		if !strings.Contains(resp, `"error"`) || !strings.Contains(resp, "deliver_subject") {
			t.Errorf("push consumer delivering to %s: %s", g.subject, resp)
		}
		if _, err := e.admin.Consumer(testutil.Context(t, 10*time.Second), protocol.StreamCommands, name); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Errorf("consumer %s delivering to %s exists: %v", name, g.subject, err)
		}
	}
	for _, g := range e.targets() {
		g.check(t, e)
	}
}

// createConsumer sends edge-x's request to create consumer name of its
// own commands (an ordered consumer's config plus extra) and returns the answer.
func (e *reflectEnv) createConsumer(t *testing.T, name string, extra map[string]any) string {
	t.Helper()
	cfg := map[string]any{"name": name, "filter_subject": protocol.CommandSubject("edge-x"), "deliver_policy": "all",
		"ack_policy": "none", "replay_policy": "instant", "inactive_threshold": int64(time.Minute), "num_replicas": 1, "mem_storage": true}
	for k, v := range extra {
		cfg[k] = v
	}
	body, err := json.Marshal(map[string]any{"stream_name": protocol.StreamCommands, "config": cfg})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.x.Request("$JS.API.CONSUMER.CREATE."+protocol.StreamCommands+"."+name+"."+protocol.CommandSubject("edge-x"), body, 10*time.Second)
	if err != nil {
		t.Fatalf("create consumer %s: %v", name, err)
	}
	return string(m.Data)
}
