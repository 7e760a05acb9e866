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
)

// Command consumers: each simulated agent, once registered, reads its
// commands as ax-agent does (agent/link.go startCommands): an ordered
// consumer on AX_CMD filtered to its subject, named "<id>~<random>" (the
// name the controller's consumer gateway allows an agent), from its cursor
// + 1, with idle heartbeats. Runs received are counted per agent.

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
	if _, err := c.Consume(func(m jetstream.Msg) { s.onCommand(a, m) }, jetstream.PullHeartbeat(5*time.Second)); err != nil {
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
	if cmd.Kind == protocol.CmdRun && cmd.Agent == a.id {
		a.runs.Add(1)
	}
}

// sendRuns creates one asap job pinned to each agent through the HTTP API
// (workers at a time) and waits until every agent received one more run
// than before, or until wait passes. It returns the agents that did and
// the time from the first request.
func (s *sim) sendRuns(ctx context.Context, api string, workers int, wait time.Duration) (int, time.Duration, error) {
	before := make([]int64, len(s.agents))
	for i, a := range s.agents {
		before[i] = a.runs.Load()
	}
	t0 := time.Now()
	ids := make(chan string)
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				if err := createRun(ctx, api, id); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	for _, a := range s.agents {
		ids <- a.id
	}
	close(ids)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return 0, time.Since(t0), fmt.Errorf("%d job creations failed, first: %v", n, firstErr.Load())
	}
	got := 0
	for time.Since(t0) < wait {
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
	body, err := json.Marshal(map[string]any{"name": "fleetsim-run", "handler": "noop",
		"schedule": map[string]any{"asap": true}, "target": map[string]any{"agent": id}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/v1/jobs", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v1/jobs for %s: %d %s", id, res.StatusCode, b)
	}
	return nil
}

// runsPhase sends a run to every agent and prints how many arrived.
func (s *sim) runsPhase(ctx context.Context, what, api string) error {
	got, d, err := s.sendRuns(ctx, api, 32, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("%s runs: %w", what, err)
	}
	fmt.Printf("%s: a run sent to each of %d agents (asap job via the API): received by %d within %s (consumer errors %d)\n",
		what, len(s.agents), got, d.Round(time.Millisecond), s.consErr.Load())
	return nil
}
