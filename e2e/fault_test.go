package e2e

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
)

// Environment of TestFaultInjection.
const (
	// envFaultSeed is the first seed (default faultDefaultSeed).
	envFaultSeed = "AX_FAULT_SEED"
	// envFaultRuns runs that many seeds in a row: seed, seed+1, ...
	envFaultRuns = "AX_FAULT_RUNS"
	// envFaultSoak is the length of the fault phase (default
	// faultDefaultSpan); set, it also runs the test under -short.
	envFaultSoak = "AX_FAULT_SOAK"
	// envFaultReplicas is the number of controller replicas of
	// TestFaultInjectionReplicas (default 2, at most 5).
	envFaultReplicas = "AX_FAULT_REPLICAS"
	// envFaultDedupWindow sets the controllers' reports.dedup_window, the
	// live grace (default 10m): a shorter one has the sweeper remove
	// finished work from live state within the fault phase, faults and
	// all.
	envFaultDedupWindow = "AX_FAULT_DEDUP_WINDOW"

	faultDefaultSeed = 1
	faultDefaultSpan = 80 * time.Second
	// faultQuiesceTimeout bounds the wait for a quiet cluster after healing.
	faultQuiesceTimeout = 90 * time.Second
)

// TestFaultInjection runs the controller and three agents as processes
// (each agent linked to NATS through its own faultproxy) with a mixed
// load, injects faults at times drawn from a seed, heals everything,
// waits until the cluster is quiet and reconciles what the handlers
// themselves logged against what the controller recorded.
//
// Load (fault_jobs_test.go): a job pinned to each agent every 2s (runs of
// 0.2-1.5s), a pinned exec job and a pinned http job every 2s, a pinned
// cron job with seconds (*/3), a group job of mode any every 1s, a
// broadcast job (mode all) every 3s, 20 jobs firing together every second
// on the second agent (agents run 2 workers and a ready queue of 16, so
// fires wait there and spill to SQLite), and a stream of one-shot jobs
// (asap or delay 0.5-4s, pinned or to the group, run by a Go handler,
// exec or http). Every handler fails a share of its attempts with a
// retryable error (exit 75, HTTP 503), decided by a hash of (exec id,
// attempt), and jobs allow 2-4 attempts with backoff. Faults (fault_plan_test.go): SIGKILL and restart
// of an agent (same store), link cuts of 1-6s, SIGSTOP/SIGCONT of an agent
// or of the controller, SIGKILL and restart of the controller (embedded
// NATS with it), below and above the 2s lease TTL. Then every fault is
// healed, periodic jobs are paused, and the test waits until the cluster
// is quiet: every one-shot job has its execution, every execution is
// terminal, every agent sent a heartbeat with an empty outbox, ready
// queue and no running handler, AX_RPT holds no report, no run is still
// going, and all this twice in a row at least a second apart with
// nothing changed. Only then are runs and records compared, so a "lost"
// is a run whose report is nowhere any more, not one still on its way.
//
// Each handler run appends "agent exec_id attempt epoch start - -" when it
// starts and "agent exec_id attempt epoch start end exit" when it ends
// (fault_runlog_test.go): a run killed with its agent has a start line
// only and still counts as a run. The invariants (docs/architecture.md: State
// machine, Leases and epochs, Failure handling; README "Guarantees under faults"):
//
//   - lost: every run has an execution record whose attempt is at least the
//     run's, and every one-shot job has an execution. A fire made under a
//     valid lease is recorded even when its report arrives after the lease
//     moved (docs/architecture.md: Leases and epochs), so a rejected old-epoch report that leaves its
//     run without a record is a loss.
//   - duplicate: no (exec id, attempt) runs twice. At-least-once holds per
//     execution, across attempts: a run killed or cut off mid-way is run
//     again only as a higher attempt.
//   - stuck: no execution is left non-terminal once quiet (or when the
//     wait for quiet gives up after 90s: the report then says why it was
//     not quiet).
//   - early: no run starts before its scheduled time (the record's
//     scheduled_at, else the exec id's), nor an attempt n>1 before the
//     next_attempt_at of the RETRY_WAITING event of attempt n-1, and that
//     event's backoff is at least the job's policy (base·2^(n-2) capped at
//     max; jitter only adds). Without the event (a controller killed
//     between its write and its event), an attempt after a failed run
//     starts at least the backoff after that run's end.
//   - misrecorded: the record's final word on its attempt agrees with the
//     handler: SUCCESS only for a run that ended with exit 0; FAILED (by
//     a failure, not agent_lost/interrupted, whose result nobody saw) not
//     for a run that succeeded, and not while retryable attempts remain;
//     SKIPPED not for a fire that ran; never CANCELLED (the test cancels
//     nothing); the record's agent is the one that ran the attempt.
//   - overlap: every job has concurrency 1, so two runs of a job never
//     overlap on one agent process (a run is cut where its agent was
//     SIGKILLed: a restarted agent cannot know an exec script left
//     running). Periodic jobs have overlap forbid: of two fires of a job
//     on one agent that both ran, the later-triggered one was not
//     triggered while the other was active, active meaning triggered and
//     not finished, waiting in the ready queue or in SQLite included
//     (agent/scheduler/jobs.go's jobRef.active; overlap forbid's "while the last still
//     runs" read that way). Trigger times are read from the agents' own
//     stores once the agents are stopped: the records carry them shifted
//     by the agent's clock-offset estimate.
//   - fencing: every run of the group job carries an epoch, and no epoch
//     fired on two agents.
//   - history: an execution's events in AX_EVT, in stream order, never go
//     back: each is at the attempt of the one before it or a later one,
//     and within an attempt at its step or a later one (a create's
//     PENDING, TRIGGERED, RUNNING, the attempt's end). A create's PENDING
//     event stored late is excused (and listed) only when the controller
//     that made it had a fault begin within 2 s of the create: it is held
//     up to a second, and a publish made just before a stall arrives
//     after it. Events may be missing (one event per report; a lost one
//     repaired at a reload carries the record's state then); that they
//     are complete, TestReplicaKill9UnderLoad checks.
//
// Not checked: that every periodic slot fired (misfire policies may drop
// slots while an agent is down). The test ends by SIGKILLing the agents to read their stores.
//
// AX_FAULT_SEED picks the seed (default 1, printed), AX_FAULT_RUNS=N runs N
// seeds in a row, AX_FAULT_SOAK=<duration> sets the fault phase (default
// 80s, about two minutes in all) and runs the test under -short too;
// without it -short skips the test. AX_FAULT_DEDUP_WINDOW=<duration> (at
// least 1m) sets the controllers' live grace, so that a soak longer than
// it also removes finished work from live state while faults go on. The seed fixes the plan, not the
// interleaving: faults are applied by one loop that is late by however
// long a restart takes. Counts, examples of each violation, the figures
// of the run and the faults applied are printed on failure and with -v.
func TestFaultInjection(t *testing.T) {
	runFaultInjection(t, 1, faultDefaultSpan)
}

// TestFaultInjectionReplicas is TestFaultInjection with the controller as
// two replicas on a NATS server of the test's (AX_FAULT_REPLICAS picks
// 2-5) and faults of each replica: SIGKILL and restart, SIGSTOP and
// SIGCONT, and cuts and freezes of its link to NATS (fault_replicas_test.go). A
// replica out for longer than the lease TTL loses its shards to the
// others and must stop working them; the invariants are the same. Its
// fault phase is 60s unless AX_FAULT_SOAK sets it.
func TestFaultInjectionReplicas(t *testing.T) {
	replicas := 2
	if v := os.Getenv(envFaultReplicas); v != "" {
		var err error
		if replicas, err = strconv.Atoi(v); err != nil || replicas < 2 || replicas > 5 {
			t.Fatalf("%s: %q is not a count from 2 to 5", envFaultReplicas, v)
		}
	}
	runFaultInjection(t, replicas, 60*time.Second)
}

// runFaultInjection runs the seeds of the environment with replicas
// controllers, the fault phase span unless AX_FAULT_SOAK sets it.
func runFaultInjection(t *testing.T, replicas int, span time.Duration) {
	seed, runs, soak := faultOptions(t)
	if testing.Short() && os.Getenv(envFaultSoak) == "" {
		t.Skip("spawns a controller and agent processes for minutes; set AX_FAULT_SOAK to run it under -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the exec script reads /proc")
	}
	if soak > 0 {
		span = soak
	}
	for i := range runs {
		s := seed + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) { runFaultSeed(t, s, span, replicas) })
	}
}

// faultOptions reads the environment of TestFaultInjection: the first
// seed, the number of seeds, and the fault phase (0: not set).
func faultOptions(t *testing.T) (seed uint64, runs int, span time.Duration) {
	t.Helper()
	seed, runs = faultDefaultSeed, 1
	var err error
	if v := os.Getenv(envFaultSeed); v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s: %q is not an unsigned integer", envFaultSeed, v)
		}
	}
	if v := os.Getenv(envFaultRuns); v != "" {
		if runs, err = strconv.Atoi(v); err != nil || runs < 1 {
			t.Fatalf("%s: %q is not a count ≥ 1", envFaultRuns, v)
		}
	}
	if v := os.Getenv(envFaultSoak); v != "" {
		if span, err = time.ParseDuration(v); err != nil || span < 10*time.Second {
			t.Fatalf("%s: %q is not a duration ≥ 10s", envFaultSoak, v)
		}
	}
	return seed, runs, span
}

// runFaultSeed is one run of TestFaultInjection.
func runFaultSeed(t *testing.T, seed uint64, span time.Duration, replicas int) {
	t.Logf("%s=%d, fault phase %s, %d controller(s)", envFaultSeed, seed, span, replicas)
	dir := t.TempDir()
	runLog := filepath.Join(dir, "runs.log")
	srv := faultHTTPServer(t, runLog)
	h := faultHandlers{runLog: runLog, script: writeFaultScript(t, dir), http: srv.URL}
	c := newFaultCluster(t, 3, replicas, []string{envAgentRunLog + "=" + runLog, envAgentExecAllow + "=" + h.script,
		envAgentHTTPAllow + "=" + srv.URL + "/", envAgentWorkers + "=2", envAgentQueueSize + "=16"})
	var ids []string
	for _, a := range c.agents {
		ids = append(ids, a.id)
	}

	jobs := map[string]faultJob{}
	var periodic []string
	for _, j := range periodicJobs(rand.New(rand.NewPCG(seed, 1)), h, ids) {
		got, err := c.api.CreateJob(testutil.Context(t, 30*time.Second), j.Job)
		if err != nil {
			t.Fatalf("create %s: %v", j.Name, err)
		}
		jobs[got.ID] = faultJob{Job: got, kind: j.kind, class: j.class}
		periodic = append(periodic, got.ID)
	}
	plan := planFaults(rand.New(rand.NewPCG(seed, 2)), span, len(ids), replicas)
	sub, err := newSubmitter("http://"+c.apiAddr, oneShotJobs(rand.New(rand.NewPCG(seed, 3)), h, ids, seed, span))
	if err != nil {
		t.Fatal(err)
	}

	// The fault phase: faults in this goroutine, one-shot jobs in another.
	c.t0 = time.Now()
	ctx, stop := context.WithCancel(context.Background())
	subDone := make(chan struct{})
	go func() {
		defer close(subDone)
		sub.run(ctx, c.t0)
	}()
	c.runFaults(plan)
	<-time.After(time.Until(c.t0.Add(span))) // the plan's clock
	stop()
	<-subDone

	// Heal, stop the periodic jobs, create what the stream left unanswered.
	c.healAll()
	c.note("healed")
	c.waitReady()
	for _, id := range periodic {
		var err error
		testutil.EventuallyFunc(t, 30*time.Second, func() string { return fmt.Sprintf("pause %s: %v", id, err) }, func() bool {
			_, err = c.api.PauseJob(context.Background(), id)
			return err == nil
		})
	}
	oneShots := sub.finish(t)
	for _, j := range oneShots {
		jobs[j.ID] = j
	}
	c.note("periodic jobs paused, %d one-shot jobs created (%d create calls failed during faults)", len(oneShots), sub.errs)

	d, notQuiet := c.quiesce(jobs, oneShots, runLog)
	d.events = streamEvents(t, c.natsURL())
	if d.triggers, err = c.triggerTimes(testutil.Context(t, time.Minute), slices.Collect(maps.Keys(jobs))); err != nil {
		t.Fatalf("read the agents' stores: %v", err)
	}
	rep := reconcile(d)
	rep.stats = append(rep.stats, c.rejectedReports()...)
	if notQuiet != "" {
		rep.stats = append(rep.stats, fmt.Sprintf("NOT QUIET after %s: %s (a run counted lost may have its report still on the way)",
			faultQuiesceTimeout, notQuiet))
	}
	text := fmt.Sprintf("%s=%d: %s\n%s", envFaultSeed, seed, rep.counts(), rep.format(3))
	log := "faults applied:\n  " + strings.Join(c.applied, "\n  ")
	if rep.failed() || notQuiet != "" {
		t.Errorf("invariants broken under faults, %s%s\nreproduce: %s=%d go test -count=1 -run 'TestFaultInjection' -v ./e2e",
			text, log, envFaultSeed, seed)
		return
	}
	if testing.Verbose() {
		t.Logf("%s%s", text, log)
	}
}
