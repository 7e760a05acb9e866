package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// testConfig returns a config for an embedded server on a random port with
// its store in dir.
func testConfig(t testing.TB, dir string) Config {
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg.NATS.Port = -1
	cfg.AckWait = 2 * time.Second
	// A list made after a write waits for the history index, and a write
	// for its events' acks, 2 s at most in production; a loaded -race run
	// can take longer, and the tests read their own writes.
	cfg.historyReadWait, cfg.eventAckWait = 20*time.Second, 20*time.Second
	cfg.unboundedAgentRates = true // the test agents register and heartbeat back to back
	if os.Getenv("AX_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return cfg
}

// startController starts a controller and closes it when the test ends.
func startController(t testing.TB, cfg Config) *Controller {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		// Every change the controller made to an execution on its own ran
		// as a write op (writemarks.go): a path without one pins the mark.
		if n := c.marks.UntrackedCount(); n > 0 {
			t.Errorf("%d execution writes made outside a write op", n)
		}
	})
	return c
}

func newTestController(t testing.TB) *Controller {
	return startController(t, testConfig(t, t.TempDir()))
}

// clientJS connects a plain client to url for the rest of the test and
// returns its JetStream context.
func clientJS(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func tctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every few milliseconds until it holds or the
// deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, d, what, cond)
}

// waitExec polls an execution until pred holds and returns it.
func waitExec(t testing.TB, c *Controller, execID string, what string, pred func(protocol.Execution) bool) protocol.Execution {
	t.Helper()
	var last protocol.Execution
	eventually(t, 20*time.Second, execID+" "+what+fmt.Sprintf(" (last seen %+v)", &last), func() bool {
		e, err := c.GetExecution(context.Background(), execID)
		if err != nil {
			return false
		}
		last = e
		return pred(e)
	})
	return last
}

func inState(s protocol.State) func(protocol.Execution) bool {
	return func(e protocol.Execution) bool { return e.State == s }
}

// everyJob returns a pinned periodic job spec.
func everyJob(agent, every string) protocol.Job {
	return protocol.Job{Name: "every-" + every, Handler: "noop", Schedule: schedule.Spec{Every: every},
		Target: protocol.Target{Agent: agent}}
}

// asapJob returns a pinned one-shot job spec.
func asapJob(agent string) protocol.Job {
	return protocol.Job{Name: "asap", Handler: "noop", Schedule: schedule.Spec{Asap: true}, Target: protocol.Target{Agent: agent}}
}

// asapJobs returns n pinned one-shot job specs.
func asapJobs(agent string, n int) []protocol.Job {
	js := make([]protocol.Job, n)
	for i := range js {
		js[i] = asapJob(agent)
	}
	return js
}

// onlineAgents returns n records of registered agents online at now,
// named prefix-00000 on.
func onlineAgents(prefix string, n int, now time.Time) []protocol.AgentInfo {
	out := make([]protocol.AgentInfo, n)
	for i := range out {
		out[i] = protocol.AgentInfo{Agent: fmt.Sprintf("%s-%05d", prefix, i), Online: true, RegisteredAt: now, LastSeen: now}
	}
	return out
}

// testAgent is a test double of ax-agent: it registers, reads its commands
// from AX_CMD with an ordered consumer from cursor+1, and publishes reports
// to AX_RPT with their Msg-Ids. It never fires on its own: tests drive it.
type testAgent struct {
	t      testing.TB
	id     string
	labels map[string]string
	nc     *nats.Conn
	js     jetstream.JetStream
	shards int

	mu     sync.Mutex
	cmds   []cmdAt
	cursor uint64
	cc     jetstream.ConsumeContext
}

type cmdAt struct {
	seq uint64
	cmd protocol.Command
}

// newTestAgent connects a test agent; extra are added to its connection
// options (its credentials with nats.auth: nkeys).
func newTestAgent(t testing.TB, url, id string, labels map[string]string, extra ...nats.Option) *testAgent {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.CustomInboxPrefix(protocol.InboxPrefix(id)), nats.MaxReconnects(-1)}, extra...)...)
	if err != nil {
		t.Fatalf("agent %s connect: %v", id, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	a := &testAgent{t: t, id: id, labels: labels, nc: nc, js: js, shards: protocol.DefaultShards}
	t.Cleanup(a.close)
	return a
}

func (a *testAgent) close() {
	if a.cc != nil {
		a.cc.Stop()
	}
	a.nc.Close()
}

// register sends a registration with the agent's cursor and checks the reply.
func (a *testAgent) register() protocol.RegisterReply {
	a.t.Helper()
	a.mu.Lock()
	cursor := a.cursor
	a.mu.Unlock()
	rr, err := a.tryRegister(cursor)
	if err != nil {
		a.t.Fatalf("agent %s register: %v", a.id, err)
	}
	return rr
}

func (a *testAgent) tryRegister(cursor uint64) (protocol.RegisterReply, error) {
	data, err := protocol.Encode(protocol.Register{V: protocol.Version, Agent: a.id, Labels: a.labels,
		Handlers: []string{"noop"}, Version: "test", OS: "linux", Arch: "arm64", Cursor: cursor, SentAt: time.Now()})
	if err != nil {
		return protocol.RegisterReply{}, err
	}
	msg, err := a.nc.Request(protocol.RegisterSubject(a.id), data, 10*time.Second)
	if err != nil {
		return protocol.RegisterReply{}, err
	}
	rr, err := protocol.DecodeRegisterReply(msg.Data)
	if err != nil {
		return rr, err
	}
	if rr.Error != "" {
		return rr, fmt.Errorf("refused: %s", rr.Error)
	}
	a.shards = rr.Shards
	return rr, nil
}

func (a *testAgent) heartbeat() protocol.HeartbeatReply {
	a.t.Helper()
	return a.sendHeartbeat(protocol.Heartbeat{})
}

// sendHeartbeat sends hb (agent, version and send time filled in) and
// returns the reply.
func (a *testAgent) sendHeartbeat(hb protocol.Heartbeat) protocol.HeartbeatReply {
	a.t.Helper()
	hb.V, hb.Agent, hb.SentAt = protocol.Version, a.id, time.Now()
	data, err := protocol.Encode(hb)
	if err != nil {
		a.t.Fatal(err)
	}
	msg, err := a.nc.Request(protocol.HeartbeatSubject(a.id), data, 10*time.Second)
	if err != nil {
		a.t.Fatalf("heartbeat: %v", err)
	}
	hr, err := protocol.DecodeHeartbeatReply(msg.Data)
	if err != nil {
		a.t.Fatalf("heartbeat reply: %v", err)
	}
	return hr
}

// follow starts reading commands from cursor+1.
func (a *testAgent) follow() {
	a.t.Helper()
	ctx := tctx(a.t)
	a.mu.Lock()
	start := a.cursor + 1
	a.mu.Unlock()
	cons, err := a.js.OrderedConsumer(ctx, protocol.StreamCommands, jetstream.OrderedConsumerConfig{
		NamePrefix:     protocol.CommandConsumerPrefix(a.id) + nuid.Next(), // as the agent: the gateway needs it (nats.auth: nkeys)
		FilterSubjects: []string{protocol.CommandSubject(a.id)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy, OptStartSeq: start,
	})
	if err != nil {
		a.t.Fatalf("agent %s consumer: %v", a.id, err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		cmd, err := protocol.DecodeCommand(m.Data())
		if err != nil {
			a.t.Errorf("agent %s: bad command: %v", a.id, err)
			return
		}
		a.mu.Lock()
		a.cmds = append(a.cmds, cmdAt{seq: md.Sequence.Stream, cmd: cmd})
		a.cursor = md.Sequence.Stream
		a.mu.Unlock()
	})
	if err != nil {
		a.t.Fatal(err)
	}
	a.cc = cc
}

func (a *testAgent) start() *testAgent {
	a.follow()
	a.register()
	return a
}

// commands returns the commands received so far.
func (a *testAgent) commands() []protocol.Command {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]protocol.Command, len(a.cmds))
	for i, c := range a.cmds {
		out[i] = c.cmd
	}
	return out
}

// waitCommand waits for the n-th (0-based) command matching pred.
func (a *testAgent) waitCommand(what string, pred func(protocol.Command) bool) protocol.Command {
	a.t.Helper()
	var got protocol.Command
	eventually(a.t, 20*time.Second, "agent "+a.id+" command: "+what, func() bool {
		for _, c := range a.commands() {
			if pred(c) {
				got = c
				return true
			}
		}
		return false
	})
	return got
}

func isRun(execID string, attempt int) func(protocol.Command) bool {
	return func(c protocol.Command) bool {
		return c.Kind == protocol.CmdRun && (execID == "" || c.Run.ExecID == execID) && (attempt == 0 || c.Run.Attempt == attempt)
	}
}

func isAssign(jobID string, gen uint64) func(protocol.Command) bool {
	return func(c protocol.Command) bool {
		return c.Kind == protocol.CmdAssign && c.Assign.Job.ID == jobID && (gen == 0 || c.Assign.Job.Generation == gen)
	}
}

// rep builds a report of this agent.
func (a *testAgent) rep(jobID, execID string, attempt int, kind protocol.ReportKind, scheduled time.Time) protocol.Report {
	return protocol.Report{V: protocol.Version, Agent: a.id, JobID: jobID, ExecID: execID, Attempt: attempt,
		Kind: kind, ScheduledAt: scheduled, At: time.Now()}
}

func finished(r protocol.Report, o retry.Outcome, res retry.Result, d time.Duration) protocol.Report {
	r.Kind, r.Outcome, r.Result, r.Duration = protocol.ReportFinished, o, &res, protocol.Duration(d)
	return r
}

// publish sends a report with its Msg-Id prefixed by the agent's id, as
// ax-agent prefixes it with a salt of its own (or msgID when not empty),
// and waits for the PubAck.
func (a *testAgent) publish(r protocol.Report, msgID string) {
	a.t.Helper()
	data, err := protocol.Encode(r)
	if err != nil {
		a.t.Fatalf("encode report: %v", err)
	}
	if msgID == "" {
		msgID = a.id + "/" + r.MsgID()
	}
	subj := protocol.ReportSubject(protocol.Shard(r.JobID, a.shards), a.id)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.js.Publish(ctx, subj, data, jetstream.WithMsgID(msgID)); err != nil {
		a.t.Fatalf("publish report %s: %v", msgID, err)
	}
}

// runAttempt reports triggered, running and finished for one attempt.
func (a *testAgent) runAttempt(jobID, execID string, attempt int, scheduled time.Time, o retry.Outcome, res retry.Result) {
	a.t.Helper()
	a.publish(a.rep(jobID, execID, attempt, protocol.ReportTriggered, scheduled), "")
	r := a.rep(jobID, execID, attempt, protocol.ReportRunning, scheduled)
	r.Lag = protocol.Duration(3 * time.Millisecond)
	a.publish(r, "")
	a.publish(finished(a.rep(jobID, execID, attempt, protocol.ReportFinished, scheduled), o, res, 7*time.Millisecond), "")
}

// recordEvents records the events stored in AX_EVT from now on (creating
// the streams if no controller did yet).
func recordEvents(t testing.TB, url string) *natstest.Events {
	t.Helper()
	_, js := natstest.JetStream(t, url)
	if _, err := streams.Ensure(tctx(t), js, streams.Config{}); err != nil {
		t.Fatal(err)
	}
	return natstest.WatchStoredEvents(t, url)
}

// putAgents stores the records of agents in ax_agents (as other replicas
// would, asynchronous publishes) and waits until c's registry holds them
// all: the fleet's follower of ax_agents read them.
func putAgents(tb testing.TB, c *Controller, agents []protocol.AgentInfo) {
	tb.Helper()
	_, js := natstest.JetStream(tb, c.NATSURL())
	for _, a := range agents {
		data, err := json.Marshal(a)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := js.PublishAsync(streams.KVSubject(protocol.BucketAgents, a.Agent), data); err != nil {
			tb.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-tctx(tb).Done():
		tb.Fatal("publishing the agents' records did not complete")
	}
	eventually(tb, 60*time.Second, fmt.Sprintf("the registry holds %d agents", len(agents)), func() bool {
		for _, a := range agents {
			if _, ok := c.agents.Get(a.Agent); !ok {
				return false
			}
		}
		return true
	})
}

// mustCreateJobs creates jobs in one batch (at most MaxBatchJobs) and fails
// the test on any error, the batch's or a job's.
func mustCreateJobs(tb testing.TB, ctx context.Context, c *Controller, jobs []protocol.Job) {
	tb.Helper()
	res, err := c.CreateJobs(ctx, jobs)
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			tb.Fatal(r.Err)
		}
	}
}

// onExternalServer starts a NATS server of its own, a controller on it
// (its config changed by adjust first, when given) and test agent edge-1:
// the start of a test that stops the controller and starts another on the
// same store. It returns the config to start the next one with.
func onExternalServer(t *testing.T, adjust func(*Config)) (Config, *Controller, *testAgent) {
	t.Helper()
	srv := natstest.Start(t)
	cfg := testConfig(t, "")
	cfg.NATS.URL = srv.URL()
	if adjust != nil {
		adjust(&cfg)
	}
	c := startController(t, cfg)
	return cfg, c, newTestAgent(t, srv.URL(), "edge-1", nil).start()
}

// storedEvent reports whether AX_EVT holds an event of job jobID to state:
// it reads the messages on the event's stored subject (a partition that
// other jobs share, protocol.EventStoredSubject) and looks at their job.
func storedEvent(t testing.TB, js jetstream.JetStream, state protocol.State, jobID string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	subj := protocol.EventStoredSubject(state, jobID)
	st, err := js.Stream(ctx, protocol.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	n := info.State.Subjects[subj]
	if n == 0 {
		return false
	}
	cons, err := js.OrderedConsumer(ctx, protocol.StreamEvents, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subj}})
	if err != nil {
		t.Fatal(err)
	}
	for range n {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("read %s: %v", subj, err)
		}
		var ev struct {
			JobID string `json:"job_id"`
		}
		if json.Unmarshal(m.Data(), &ev) == nil && ev.JobID == jobID {
			return true
		}
	}
	return false
}

// scanExecs calls fn with every execution in the bucket, each key's latest
// record (scanExecsOf picking every record whole).
func (c *execService) scanExecs(ctx context.Context, fn func(r *execRecord, rev uint64)) error {
	return scanExecsOf(ctx, c, func(r *execRecord) (*execRecord, bool) { return r, true },
		func(_ string, r *execRecord, rev uint64) { fn(r, rev) }, 0)
}
