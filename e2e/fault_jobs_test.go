package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/controller/client"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// The jobs of TestFaultInjection: periodic jobs created before the faults
// start, and a stream of one-shot jobs created during the fault phase,
// all drawn from the seed.

// faultHandlers is what the jobs' handlers need: the run log, the exec
// script and the HTTP server.
type faultHandlers struct {
	runLog string
	script string
	http   string // base URL of the HTTP server
}

// faultJob is a job of the test as the controller created it, with the
// kind of handler that runs it.
type faultJob struct {
	protocol.Job
	kind  string // "go", "exec" or "http"
	class string // groups jobs alike in the report; "" for the job's own
}

// policy is the job's retry policy with the controller's defaults.
func (j faultJob) policy() retry.Policy {
	return retry.Policy{MaxAttempts: j.Retry.MaxAttempts, Base: time.Duration(j.Retry.Base),
		Max: time.Duration(j.Retry.Max), Jitter: time.Duration(j.Retry.Jitter)}.WithDefaults()
}

// spec fills in the handler and payload of j for kind: a run that fails
// (retryably) for pct percent of the (exec id, attempt) pairs and lasts
// hold. agentID is the pinned agent, for the HTTP server's log ("" for a
// group target).
func (h faultHandlers) spec(j protocol.Job, kind string, pct int, hold time.Duration, agentID string) faultJob {
	switch kind {
	case "go":
		j.Handler = faultHandlerName
		b, _ := json.Marshal(faultPayload{FailPct: pct, HoldMS: int(hold / time.Millisecond)})
		j.Payload = b
	case "exec":
		j.Handler = "exec"
		b, _ := json.Marshal(map[string]any{"command": h.script,
			"args": []string{h.runLog, fmt.Sprint(pct), fmt.Sprintf("%.3f", hold.Seconds())}})
		j.Payload = b
	case "http":
		j.Handler = "http"
		if agentID == "" {
			agentID = "unknown"
		}
		b, _ := json.Marshal(map[string]any{"url": fmt.Sprintf("%s/run?pct=%d&hold=%d&agent=%s", h.http, pct, hold/time.Millisecond, agentID)})
		j.Payload = b
	}
	return faultJob{Job: j, kind: kind}
}

// periodicJobs are the jobs created before the faults: pinned every 2s
// on each agent (Go handler, holds drawn in 0.2-1.5s so that retries and
// catch-up fires pile up), pinned every 2s through exec and http, a cron
// job with seconds, a group job of mode any every 1s and a broadcast job
// every 3s. Each fails 10-20% of its attempts, retryably, with up to 3 or
// 4 attempts. On top, backlogJobs jobs pinned to the second agent fire
// together at every second (cron) for 40ms each: each burst is more than
// its ready queue (16) holds with its 2 workers busy, so fires spill to
// SQLite for a moment; after a freeze or a restart the backlog lasts
// longer. In steady state the agent keeps up (0.8s of work a second).
func periodicJobs(rng *rand.Rand, h faultHandlers, agents []string) []faultJob {
	periodicRetry := protocol.RetrySpec{MaxAttempts: 3, Base: protocol.Duration(300 * time.Millisecond),
		Max: protocol.Duration(time.Second), Jitter: protocol.Duration(100 * time.Millisecond)}
	pin := func(name, agentID string, s schedule.Spec) protocol.Job {
		return protocol.Job{Name: name, Schedule: s, Target: protocol.Target{Agent: agentID}, Retry: periodicRetry}
	}
	every2 := schedule.Spec{Every: "2s"}
	var out []faultJob
	for _, a := range agents {
		hold := 200*time.Millisecond + time.Duration(rng.Int64N(int64(1300*time.Millisecond)))
		out = append(out, h.spec(pin("pinned-"+a, a, every2), "go", 20, hold, a))
	}
	out = append(out,
		h.spec(pin("exec-"+agents[0], agents[0], every2), "exec", 20, 400*time.Millisecond, agents[0]),
		h.spec(pin("http-"+agents[len(agents)-1], agents[len(agents)-1], every2), "http", 20, 200*time.Millisecond, agents[len(agents)-1]),
		h.spec(pin("cron-"+agents[1%len(agents)], agents[1%len(agents)], schedule.Spec{Cron: "*/3 * * * * *"}), "go", 20, 300*time.Millisecond, agents[1%len(agents)]),
		h.spec(protocol.Job{Name: "group-any", Schedule: schedule.Spec{Every: "1s"},
			Target: protocol.Target{Group: faultGroup, Mode: protocol.ModeAny},
			Retry:  protocol.RetrySpec{MaxAttempts: 4, Base: protocol.Duration(200 * time.Millisecond), Max: protocol.Duration(time.Second)}},
			"go", 20, 300*time.Millisecond, ""),
		h.spec(protocol.Job{Name: "broadcast", Schedule: schedule.Spec{Every: "3s"},
			Target: protocol.Target{Group: faultGroup, Mode: protocol.ModeAll},
			Retry:  protocol.RetrySpec{MaxAttempts: 2, Base: protocol.Duration(300 * time.Millisecond)}},
			"go", 10, 200*time.Millisecond, ""),
	)
	busy := agents[1%len(agents)]
	for i := range backlogJobs {
		j := h.spec(pin(fmt.Sprintf("backlog-%s-%02d", busy, i), busy, schedule.Spec{Cron: "* * * * * *"}), "go", 10, 40*time.Millisecond, busy)
		j.Retry.MaxAttempts = 2
		j.class = fmt.Sprintf("backlog-%s-NN (go)", busy)
		out = append(out, j)
	}
	return out
}

// backlogJobs is the number of jobs that keep one agent busy.
const backlogJobs = 20

// oneShot is a one-shot job of the stream and when to create it.
type oneShot struct {
	at  time.Duration
	job faultJob
}

// oneShotJobs draws the stream: one job every 0.4-1.2s until span, asap
// or delay 0.5-4s, pinned to a random agent or to the group (mode any),
// run by the Go handler, exec or http, failing 30-50% of its attempts
// (retryably) with 2-4 attempts and a backoff base of 0.2-0.5s.
func oneShotJobs(rng *rand.Rand, h faultHandlers, agents []string, seed uint64, span time.Duration) []oneShot {
	var out []oneShot
	for at := time.Second; at < span; at += 400*time.Millisecond + time.Duration(rng.Int64N(int64(800*time.Millisecond))) {
		n := len(out)
		j := protocol.Job{Name: fmt.Sprintf("oneshot-%d", n), IdempotencyKey: fmt.Sprintf("fault-%d-%d", seed, n),
			Retry: protocol.RetrySpec{MaxAttempts: 2 + rng.IntN(3), Base: ms(200 + rng.IntN(300)),
				Max: protocol.Duration(2 * time.Second), Jitter: ms(rng.IntN(100))}}
		if rng.IntN(2) == 0 {
			j.Schedule.Asap = true
		} else {
			j.Schedule.Delay = (500*time.Millisecond + time.Duration(rng.Int64N(int64(3500*time.Millisecond)))).Round(time.Millisecond).String()
		}
		agentID := ""
		if rng.IntN(5) < 3 {
			agentID = agents[rng.IntN(len(agents))]
			j.Target.Agent = agentID
		} else {
			j.Target = protocol.Target{Group: faultGroup, Mode: protocol.ModeAny}
		}
		kind := []string{"go", "go", "go", "go", "go", "exec", "exec", "exec", "http", "http"}[rng.IntN(10)]
		hold := time.Duration(100+rng.IntN(700)) * time.Millisecond
		out = append(out, oneShot{at: at, job: h.spec(j, kind, 30+rng.IntN(21), hold, agentID)})
	}
	return out
}

// submitter creates the one-shot jobs at their times during the fault
// phase, retrying each (with its idempotency key) until the controller
// answers; after the phase, finish creates those whose answer never came.
type submitter struct {
	api  *client.Client
	plan []oneShot

	mu      sync.Mutex
	created map[int]faultJob
	next    int // plan index not tried yet
	errs    int
	lastErr error
}

func newSubmitter(apiURL string, plan []oneShot) (*submitter, error) {
	api, err := client.New(apiURL, "", client.WithHTTPClient(&http.Client{Timeout: 3 * time.Second}))
	if err != nil {
		return nil, err
	}
	return &submitter{api: api, plan: plan, created: map[int]faultJob{}}, nil
}

// create creates job i once: done when the controller answered with the
// job (created now or before, under the same idempotency key).
func (s *submitter) create(ctx context.Context, i int) bool {
	j := s.plan[i].job
	got, err := s.api.CreateJob(ctx, j.Job)
	var ae *client.APIError
	if errors.Is(err, client.ErrExists) && errors.As(err, &ae) {
		got, err = s.api.GetJob(ctx, ae.ID)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.errs++
		s.lastErr = fmt.Errorf("create %s: %w", j.Name, err)
		return false
	}
	s.created[i] = faultJob{Job: got, kind: j.kind, class: j.class}
	return true
}

// run creates the jobs of the plan at t0+at until ctx ends.
func (s *submitter) run(ctx context.Context, t0 time.Time) {
	for i := range s.plan {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(t0.Add(s.plan[i].at))): // the plan's clock
		}
		s.mu.Lock()
		s.next = i + 1
		s.mu.Unlock()
		for !s.create(ctx, i) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(250 * time.Millisecond): // controller away: try again
			}
		}
	}
}

// finish creates, with the controller healthy again, every job whose
// create was tried and not answered; it returns every job created.
func (s *submitter) finish(tb testing.TB) []faultJob {
	tb.Helper()
	s.mu.Lock()
	next := s.next
	s.mu.Unlock()
	for i := range next {
		s.mu.Lock()
		_, ok := s.created[i]
		s.mu.Unlock()
		if !ok {
			testutil.EventuallyFunc(tb, 60*time.Second, func() string {
				s.mu.Lock()
				defer s.mu.Unlock()
				return fmt.Sprintf("one-shot job %d created after healing (last error: %v)", i, s.lastErr)
			}, func() bool { return s.create(context.Background(), i) })
		}
	}
	out := make([]faultJob, 0, len(s.created))
	for i := range next {
		out = append(out, s.created[i])
	}
	return out
}

// ms is n milliseconds.
func ms(n int) protocol.Duration { return protocol.Duration(time.Duration(n) * time.Millisecond) }
