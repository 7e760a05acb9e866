package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// A controller replica killed with SIGKILL under load: the replica runs in
// a child process (the test binary runs itself again with only
// TestHelperReplicaProcess selected and the environment naming the NATS
// server and the node), and TestReplicaKill9UnderLoad checks what happens
// to the work of its shards.
const (
	envReplicaURL  = "AX_E2E_REPLICA_URL"
	envReplicaNode = "AX_E2E_REPLICA_NODE"
)

// TestHelperReplicaProcess is not a test: startReplicaProcess runs the test
// binary again with it to get a controller replica (replicaConfig, the
// same settings as the in-process replicas) in a process of its own. It
// prints READY once started and then waits to be killed.
func TestHelperReplicaProcess(t *testing.T) {
	url := testutil.ChildEnv(t, envReplicaURL, "TestReplicaKill9UnderLoad")
	testutil.RunChild(func(ctx context.Context) error {
		c, err := controller.New(replicaConfig(url, os.Getenv(envReplicaNode)))
		if err != nil {
			return err
		}
		return c.Start(ctx)
	})
}

// startReplicaProcess runs a controller replica named node against the
// NATS server at url in a child process and waits until it is started.
// The process is killed when the test ends if it still runs.
func startReplicaProcess(t *testing.T, url, node string) *testutil.Child {
	t.Helper()
	return testutil.StartChild(t, "TestHelperReplicaProcess", []string{envReplicaURL + "=" + url, envReplicaNode + "=" + node}, 60*time.Second)
}

// loadLog records every attempt the agents ran, and runs it with flaky:
// the payload says how many first attempts fail (retryable).
type loadLog struct {
	mu   sync.Mutex
	runs map[string][]string // "<exec id>/<attempt>" → agents that ran it
}

func (l *loadLog) handler(agentID string) agent.HandlerFunc {
	return func(ctx context.Context, t agent.Task) agent.Result {
		l.mu.Lock()
		k := fmt.Sprintf("%s/%d", t.ExecID, t.Attempt)
		l.runs[k] = append(l.runs[k], agentID)
		l.mu.Unlock()
		return flaky(ctx, t)
	}
}

func (l *loadLog) snapshot() map[string][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.runs)
}

// loadJob is a job of the kill test and how many attempts it fails.
type loadJob struct {
	protocol.Job
	fail int
}

// expectedPath is the sequence of states the events of an execution of j
// must show, each once: periodic fires start TRIGGERED on the agent,
// one-shot jobs PENDING on the controller; every failed attempt is a
// RETRY_WAITING and a new TRIGGERED.
func (j loadJob) expectedPath() []protocol.State {
	var p []protocol.State
	if j.Schedule.Asap {
		p = append(p, protocol.StatePending)
	}
	p = append(p, protocol.StateTriggered, protocol.StateRunning)
	for range j.fail {
		p = append(p, protocol.StateRetryWaiting, protocol.StateTriggered, protocol.StateRunning)
	}
	return append(p, protocol.StateSuccess)
}

// reportsInFlight counts the reports of node's shards (as owners says)
// delivered and not acknowledged, and those not delivered yet.
func reportsInFlight(tb testing.TB, url string, owners []string, node string) (unacked, waiting int) {
	tb.Helper()
	nc, js := natstest.Connect(tb, url)
	defer nc.Close()
	ctx := testutil.Context(tb, 10*time.Second)
	for n, o := range owners {
		if o != node {
			continue
		}
		cons, err := js.Consumer(ctx, protocol.StreamReports, fmt.Sprintf("ax-shard-%d", n))
		if err != nil {
			tb.Fatalf("report consumer of shard %d: %v", n, err)
		}
		info := cons.CachedInfo()
		unacked += info.NumAckPending
		waiting += int(info.NumPending)
	}
	return unacked, waiting
}

// streamEvents reads every message of AX_EVT: what the stream stored,
// after its de-duplication by Msg-Id, in stream order.
func streamEvents(tb testing.TB, url string) []protocol.Event {
	tb.Helper()
	nc, js := natstest.Connect(tb, url)
	defer nc.Close()
	ctx := testutil.Context(tb, 30*time.Second)
	st, err := js.Stream(ctx, protocol.StreamEvents)
	if err != nil {
		tb.Fatal(err)
	}
	last := st.CachedInfo().State.LastSeq
	cons, err := js.OrderedConsumer(ctx, protocol.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	var out []protocol.Event
	for seq := uint64(0); seq < last; {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			tb.Fatalf("fetch events: %v", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, _ := m.Metadata()
			seq = md.Sequence.Stream
			if protocol.IsJobRetiredSubject(m.Subject()) {
				continue // a job's retirement (controller/retention), not an execution's event
			}
			e, err := protocol.DecodeEvent(m.Data())
			if err != nil {
				tb.Fatalf("event %d: %v", seq, err)
			}
			out = append(out, e)
		}
		if n == 0 && ctx.Err() != nil {
			tb.Fatalf("events: read up to %d of %d", seq, last)
		}
	}
	return out
}

// TestReplicaKill9UnderLoad: two controller replicas on one NATS server
// with 16 shards, one of them (ctl-b) a child process. Three agents run
// steady load: periodic jobs every 200ms, some of whose executions fail
// their first one or two attempts (retryable, 500ms backoff), on shards of
// both replicas. While retries of ctl-b's shards wait, ctl-b is frozen
// (SIGSTOP) until reports of its shards have been delivered to it and not
// acknowledged, then killed with SIGKILL. The survivor owns all 16 shards
// within the lease TTL (plus a margin, see below); once the load stops
// every execution ends terminal, each retryable one SUCCESS after its
// retries, every attempt ran exactly once on the agents, and each state
// transition of each attempt is stored once in AX_EVT, in the order of
// the state machine.
func TestReplicaKill9UnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a controller process")
	}
	s := natstest.Start(t)
	a := startCtl(t, replicaConfig(s.URL(), "ctl-a"))
	child := startReplicaProcess(t, s.URL(), "ctl-b")
	waitShares(t, s.URL(), time.Now(), map[string]*controller.Controller{"ctl-a": a}, map[string]int{"ctl-a": 8, "ctl-b": 8})
	ev := watchEvents(t, s.URL())

	runs := &loadLog{runs: map[string][]string{}}
	agents := []string{"edge-1", "edge-2", "edge-3"}
	for _, id := range agents {
		startAgent(t, agentConfig(id, s.URL(), t.TempDir(), nil), agent.WithHandler("load", runs.handler(id)))
		waitAgentOnline(t, a, id)
	}
	owners := a.ShardOwners()
	onChild := func(id string) bool { return owners[protocol.Shard(id, replicaShards)] == "ctl-b" }
	jobs := map[string]loadJob{}
	var childJobs []loadJob
	// Periodic jobs that succeed (fail 0) and that fail 1 or 2 attempts,
	// created until each kind has jobs on both replicas' shards (two flaky
	// ones on ctl-b's).
	for _, fail := range []int{0, 1} {
		onB, onA := 0, 0
		for i := 0; i < 16 && (onB < 1+fail || onA < 1 || i < len(agents)); i++ {
			f := fail + i%2*fail // 0, or alternately 1 and 2
			j := protocol.Job{Name: fmt.Sprintf("load-%d-%d", fail, i), Handler: "load", Schedule: schedule.Spec{Every: "200ms"},
				Payload: mustJSON(t, flakyPayload{Fail: f, Retryable: true}), Target: protocol.Target{Agent: agents[i%len(agents)]},
				Retry: protocol.RetrySpec{MaxAttempts: 5, Base: protocol.Duration(500 * time.Millisecond)}}
			lj := loadJob{Job: createJob(t, a, j), fail: f}
			jobs[lj.ID] = lj
			if onChild(lj.ID) {
				onB++
				childJobs = append(childJobs, lj)
			} else {
				onA++
			}
		}
		if onB < 1+fail || onA < 1 {
			t.Fatalf("jobs failing %d attempts: %d on ctl-b's shards, %d on ctl-a's", fail, onB, onA)
		}
	}
	t.Logf("%d periodic jobs, %d of them on ctl-b's shards", len(jobs), len(childJobs))

	// Every flaky job of ctl-b's shards has a retry pending: freeze ctl-b
	// (SIGSTOP) until reports of its shards were delivered to it and not
	// acknowledged, then SIGKILL it. For the others it died when it froze.
	var pending []protocol.Execution
	testutil.EventuallyFunc(t, 30*time.Second, func() string {
		return fmt.Sprintf("a retry pending for each flaky job of ctl-b; have %d", len(pending))
	}, func() bool {
		pending = pending[:0]
		ok := true
		for _, j := range childJobs {
			n := 0
			for _, e := range execs(t, a, j.ID) {
				if e.State == protocol.StateRetryWaiting {
					pending = append(pending, e)
					n++
				}
			}
			ok = ok && (j.fail == 0 || n > 0)
		}
		return ok
	})
	died := time.Now()
	if err := child.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var unacked, waiting int
	testutil.EventuallyFunc(t, 10*time.Second, func() string { return "reports delivered to the frozen ctl-b" }, func() bool {
		unacked, waiting = reportsInFlight(t, s.URL(), owners, "ctl-b")
		return unacked > 0
	})
	child.Kill() // SIGKILL, and wait until it is gone

	// The survivor notices the dead replica when its presence and shard
	// leases have not been renewed for LeaseTTL since the last renewal it
	// saw (up to one renew interval before ctl-b froze), then takes the
	// shards on its next ownership tick (≤ 100ms here), one to three KV
	// round trips per shard (compare-and-set; get and create once the
	// bucket TTL removed the key), eight shards in a row. The budget adds
	// 1s to the TTL for that, under the race detector on a busy 2-core
	// machine (measured 1.8-2.7s from the freeze).
	var last []string
	testutil.EventuallyFunc(t, 20*time.Second, func() string { return fmt.Sprintf("ctl-a owns all shards; owners %v", last) }, func() bool {
		last = a.ShardOwners()
		return ownerCounts(last)["ctl-a"] == replicaShards
	})
	failover := time.Since(died)
	t.Logf("ctl-b frozen and SIGKILLed with %d retries pending, %d reports delivered unacknowledged and %d waiting on its shards: "+
		"ctl-a owns all 16 shards %s after the freeze", len(pending), unacked, waiting, failover.Round(time.Millisecond))
	if budget := replicaLeaseTTL + time.Second; failover > budget {
		t.Errorf("takeover took %s, budget %s (lease TTL + 1s)", failover, budget)
	}
	waitShares(t, s.URL(), died, map[string]*controller.Controller{"ctl-a": a}, map[string]int{"ctl-a": replicaShards})
	tookOver := time.Now()
	for _, j := range childJobs {
		var n int
		testutil.EventuallyFunc(t, 30*time.Second, func() string {
			return fmt.Sprintf("3 new executions of %s SUCCESS after the takeover; have %d", j.Name, n)
		}, func() bool {
			n, _ = countSince(a, j.ID, tookOver)
			return n >= 3
		})
	}

	// Stop the load, then run one marker job per agent: the agent applies
	// commands in order and publishes its outbox in order, so once the
	// markers succeeded every fire before the pause has been reported.
	for id := range jobs {
		if _, err := a.PauseJob(testutil.Context(t, 30*time.Second), id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range agents {
		j := loadJob{Job: createJob(t, a, protocol.Job{Name: "marker-" + id, Handler: "load", Schedule: schedule.Spec{Asap: true},
			Payload: mustJSON(t, flakyPayload{}), Target: protocol.Target{Agent: id}})}
		jobs[j.ID] = j
		waitExecs(t, a, j.ID, 1, "SUCCESS", inState(protocol.StateSuccess))
	}
	// Wait until the listing holds every execution the agents ran, all
	// terminal. ListExecutions scans ax_execs with a KV watcher, which can
	// leave out a key updated during the scan: an execution missing from
	// one listing that GetExecution finds is counted, not lost.
	var all []protocol.Execution
	var ran map[string][]string
	var missing []string
	scanMissed := map[string]bool{}
	testutil.EventuallyFunc(t, 30*time.Second, func() string {
		var open []protocol.Execution
		for _, e := range all {
			if !e.State.Terminal() {
				open = append(open, e)
			}
		}
		return fmt.Sprintf("every execution listed and terminal; %d of %d are not terminal: %s; ran but not listed: %v",
			len(open), len(all), summarize(open), missing)
	}, func() bool {
		all, ran, missing = execs(t, a, ""), runs.snapshot(), missing[:0]
		listed := map[string]bool{}
		for _, e := range all {
			listed[e.ExecID] = true
		}
		for k := range ran {
			if id := k[:strings.LastIndexByte(k, '/')]; !listed[id] && !slices.Contains(missing, id) {
				missing = append(missing, id)
				if _, err := a.GetExecution(context.Background(), id); err == nil {
					scanMissed[id] = true
				}
			}
		}
		return len(missing) == 0 && !slices.ContainsFunc(all, func(e protocol.Execution) bool { return !e.State.Terminal() })
	})
	if len(scanMissed) > 0 {
		t.Logf("ListExecutions left out %d existing executions at least once (KV watcher scan): %v", len(scanMissed), slices.Sorted(maps.Keys(scanMissed)))
	}
	checkNoneLostNoneTwice(t, jobs, all, ran, streamEvents(t, s.URL()))
	for _, p := range pending {
		e := waitExec(t, a, p.ExecID, "SUCCESS", inState(protocol.StateSuccess))
		if want := jobs[p.JobID].fail + 1; e.Attempt != want {
			t.Errorf("%s pending at the kill: SUCCESS at attempt %d, want %d", p.ExecID, e.Attempt, want)
		}
	}
	core := len(ev.All())
	t.Logf("%d executions, all terminal; %d events delivered to a core subscriber (re-published events included)", len(all), core)
}

// checkNoneLostNoneTwice checks the end state of the kill test: each
// execution is SUCCESS at the attempt its job's failures imply (or
// SKIPPED without a run: an overlapping fire), every attempt ran once on
// the agents and every run belongs to a known execution, and the stored
// events of each execution are its expected path, each transition once.
func checkNoneLostNoneTwice(t *testing.T, jobs map[string]loadJob, all []protocol.Execution, runs map[string][]string, events []protocol.Event) {
	t.Helper()
	paths := map[string][]protocol.State{}
	seen := map[string]bool{}
	for _, e := range events {
		for _, st := range e.Path() {
			k := fmt.Sprintf("%s/%d/%s", e.ExecID, e.Attempt, st)
			if seen[k] {
				t.Errorf("transition %s stored twice in AX_EVT", k)
			}
			seen[k] = true
		}
		paths[e.ExecID] = append(paths[e.ExecID], e.Path()...)
	}
	known := map[string]bool{}
	skipped, retried := 0, 0
	for _, e := range all {
		known[e.ExecID] = true
		j, ok := jobs[e.JobID]
		if !ok {
			t.Errorf("execution %s of an unknown job", e.ExecID)
			continue
		}
		if e.State == protocol.StateSkipped && e.Attempt == 1 && len(runs[e.ExecID+"/1"]) == 0 &&
			slices.Equal(paths[e.ExecID], []protocol.State{protocol.StateSkipped}) {
			skipped++
			continue
		}
		if e.State != protocol.StateSuccess || e.Attempt != j.fail+1 {
			t.Errorf("%s: %s at attempt %d (%s), want SUCCESS at attempt %d", e.ExecID, e.State, e.Attempt, e.Reason, j.fail+1)
		}
		for n := 1; n <= e.Attempt; n++ {
			if got := runs[fmt.Sprintf("%s/%d", e.ExecID, n)]; len(got) != 1 {
				t.Errorf("%s attempt %d ran %d times (%v), want once", e.ExecID, n, len(got), got)
			}
		}
		if e.Attempt > 1 {
			retried++
		}
		if want := j.expectedPath(); !slices.Equal(paths[e.ExecID], want) {
			t.Errorf("%s: stored events %v, want %v", e.ExecID, paths[e.ExecID], want)
		}
	}
	for k, agents := range runs {
		if id := k[:strings.LastIndexByte(k, '/')]; !known[id] {
			t.Errorf("%s ran on %v but the controller has no execution %s (lost)", k, agents, id)
		}
	}
	t.Logf("%d executions (%d retried, %d skipped as overlapping), %d attempts run, %d events stored", len(all), retried, skipped, len(runs), len(events))
}
