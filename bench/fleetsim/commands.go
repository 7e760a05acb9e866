package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// Command consumers: each simulated agent, once registered, reads its
// commands as ax-agent does (agent/link.go startCommands): an ordered
// consumer on AX_CMD filtered to its subject, named "<id>~<random>" (the
// name the controller's consumer gateway allows an agent), from its cursor
// + 1, with idle heartbeats. Runs received are counted per agent, and each
// is reported as ax-agent reports a run that succeeded at once: a running
// report (standing for triggered too) and a finished one (success), each
// on the job's report shard subject with a Msg-Id of the agent's own
// prefix and the attempt's exec_id/attempt/kind (agent/outbox.go).

// startCommands starts agent a's command consumer (once).
func (s *sim) startCommands(ctx context.Context, a *agent) error {
	if a.cons.Load() {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := a.c.js.OrderedConsumer(cctx, protocol.StreamCommands, jetstream.OrderedConsumerConfig{
		NamePrefix:     protocol.CommandConsumerPrefix(a.id) + nuid.Next(),
		FilterSubjects: []string{protocol.CommandSubject(a.id)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    a.cursor.Load() + 1,
	})
	if err != nil {
		s.consErr.Add(1)
		return err
	}
	if _, err := c.Consume(func(m jetstream.Msg) { s.onCommand(a, m) }, jetstream.PullHeartbeat(s.c.cmdHB)); err != nil {
		s.consErr.Add(1)
		return err
	}
	a.cons.Store(true)
	return nil
}

func (s *sim) onCommand(a *agent, m jetstream.Msg) {
	if md, err := m.Metadata(); err == nil {
		a.cursor.Store(md.Sequence.Stream)
	}
	cmd, err := protocol.DecodeCommand(m.Data())
	if err != nil {
		s.badCmds.Add(1)
		return
	}
	if cmd.Kind == protocol.CmdRun && cmd.Agent == a.id && cmd.Run != nil {
		a.runs.Add(1)
		a.lastExec.Store(cmd.Run.ExecID)
		go s.reportRun(a, *cmd.Run)
	}
}

// reportRun publishes the running and finished (success) reports of run r
// and waits for their PubAcks, retrying each up to 5 times.
func (s *sim) reportRun(a *agent, r protocol.Run) {
	now := time.Now().UTC()
	base := protocol.Report{V: protocol.Version, Agent: a.id, JobID: r.Job.ID, ExecID: r.ExecID, Attempt: r.Attempt,
		ScheduledAt: r.RunAt, At: now, Epoch: r.Epoch}
	running := base
	running.Kind, running.TriggeredAt, running.Lag = protocol.ReportRunning, now, protocol.Duration(max(now.Sub(r.RunAt), 0))
	done := base
	done.Kind, done.Outcome, done.Duration = protocol.ReportFinished, retry.OutcomeSuccess, protocol.Duration(time.Millisecond)
	done.StartedAt, done.Result = now, &retry.Result{}
	subj := protocol.ReportSubject(protocol.Shard(r.Job.ID, int(s.shards.Load())), a.id)
	for _, rep := range []protocol.Report{running, done} {
		data, err := protocol.Encode(rep)
		if err != nil {
			s.reportErr.Add(1)
			return
		}
		var perr error
		for range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, perr = a.c.js.Publish(ctx, subj, data, jetstream.WithMsgID(a.id+"/"+rep.MsgID()))
			cancel()
			if perr == nil {
				break
			}
		}
		if perr != nil {
			s.reportErr.Add(1)
			return
		}
	}
	s.reports.Add(1)
}

// sendRuns creates one asap job pinned to each agent through the HTTP API
// (workers at a time) and waits until every agent received one more run
// than before, or until wait passes (counted from the first request;
// checked once at least). It returns the agents that did and
// the time from the first request.
func (s *sim) sendRuns(ctx context.Context, api string, workers int, wait time.Duration) (int, time.Duration, error) {
	before := make([]int64, len(s.agents))
	for i, a := range s.agents {
		before[i] = a.runs.Load()
	}
	t0 := time.Now()
	if err := parallel(len(s.agents), workers, func(i int) error { return createRun(ctx, api, s.agents[i].id) }); err != nil {
		return 0, time.Since(t0), fmt.Errorf("job creations: %w", err)
	}
	got := 0
	for first := true; first || time.Since(t0) < wait; first = false {
		got = 0
		for i, a := range s.agents {
			if a.runs.Load() > before[i] {
				got++
			}
		}
		if got == len(s.agents) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return got, time.Since(t0), nil
}

// createRun creates a one-shot job pinned to agent id (POST /v1/jobs).
func createRun(ctx context.Context, api, id string) error {
	return createJob(ctx, api, id, map[string]any{"asap": true})
}

// createPinned creates n periodic jobs (every 1h) pinned to the agents
// round robin, workers at a time.
func (s *sim) createPinned(ctx context.Context, api string, n, workers int) error {
	err := parallel(n, workers, func(i int) error {
		return createJob(ctx, api, s.agents[i%len(s.agents)].id, map[string]any{"every": "1h"})
	})
	if err != nil {
		return fmt.Errorf("pinned job creations: %w", err)
	}
	return nil
}

// parallel calls fn(i) for i in [0, n), workers at a time, and returns an
// error counting the calls that failed, with the first error, if any did.
func parallel(n, workers int, fn func(i int) error) error {
	idx := make(chan int)
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				if err := fn(i); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	for i := range n {
		idx <- i
	}
	close(idx)
	wg.Wait()
	if k := failed.Load(); k > 0 {
		return fmt.Errorf("%d of %d failed, first: %v", k, n, firstErr.Load())
	}
	return nil
}

// createJob creates a job with schedule pinned to agent id (POST /v1/jobs),
// trying again (up to 20 times, 500 ms apart) while the API refuses
// connections or answers 503 (a controller just restarted).
func createJob(ctx context.Context, api, id string, schedule map[string]any) error {
	var err error
	for range 20 {
		var retry bool
		if retry, err = createJobOnce(ctx, api, id, schedule); err == nil || !retry {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}

func createJobOnce(ctx context.Context, api, id string, schedule map[string]any) (retry bool, err error) {
	body, err := json.Marshal(map[string]any{"name": "fleetsim", "handler": "noop",
		"schedule": schedule, "target": map[string]any{"agent": id}})
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return ctx.Err() == nil, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
		return res.StatusCode == http.StatusServiceUnavailable, fmt.Errorf("POST /v1/jobs for %s: %d %s", id, res.StatusCode, b)
	}
	return false, nil
}

// runsPhase sends a run to every agent, prints how many arrived, then
// how many of the runs the API shows SUCCESS (the agents' reports applied).
func (s *sim) runsPhase(ctx context.Context, what, api string) error {
	rep0 := s.reports.Load()
	t0 := time.Now()
	got, d, err := s.sendRuns(ctx, api, 32, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("%s runs: %w", what, err)
	}
	fmt.Printf("%s: a run sent to each of %d agents (asap job via the API): received by %d within %s (consumer errors %d)\n",
		what, len(s.agents), got, d.Round(time.Millisecond), s.consErr.Load())
	ok, err := s.waitSuccess(ctx, api, 32, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("%s runs: %w", what, err)
	}
	fmt.Printf("%s: runs reported (running, finished) %d (report errors %d); SUCCESS in the API for %d of %d agents within %s\n",
		what, s.reports.Load()-rep0, s.reportErr.Load(), ok, len(s.agents), time.Since(t0).Round(time.Millisecond))
	return nil
}

// waitSuccess polls GET /v1/executions/{id} for each agent's last run
// (workers at a time) until every one is SUCCESS or wait passes, and
// returns how many are.
func (s *sim) waitSuccess(ctx context.Context, api string, workers int, wait time.Duration) (int, error) {
	done := make([]bool, len(s.agents))
	t0 := time.Now()
	n := 0
	for {
		idx := make(chan int)
		var mu sync.Mutex
		var firstErr error
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range idx {
					id, _ := s.agents[i].lastExec.Load().(string)
					if id == "" {
						continue
					}
					st, err := execState(ctx, api, id)
					mu.Lock()
					if err != nil && firstErr == nil {
						firstErr = err
					}
					if st == protocol.StateSuccess {
						done[i] = true
					}
					mu.Unlock()
				}
			}()
		}
		for i := range s.agents {
			if !done[i] {
				idx <- i
			}
		}
		close(idx)
		wg.Wait()
		n = 0
		for _, d := range done {
			if d {
				n++
			}
		}
		if n == len(s.agents) || time.Since(t0) > wait {
			return n, nil
		}
		if firstErr != nil && time.Since(t0) > wait/2 {
			return n, firstErr
		}
		time.Sleep(time.Second)
	}
}

// execState reads execution id's state (GET /v1/executions/{id}).
func execState(ctx context.Context, api, id string) (protocol.State, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/v1/executions/"+id, nil)
	if err != nil {
		return "", err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return "", nil
	}
	var e protocol.Execution
	if err := json.NewDecoder(res.Body).Decode(&e); err != nil {
		return "", fmt.Errorf("GET /v1/executions/%s: %d: %w", id, res.StatusCode, err)
	}
	return e.State, nil
}
