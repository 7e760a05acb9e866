package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// createStats is the outcome of creating jobs through POST /v1/jobs:batch.
type createStats struct {
	created, failed int
	calls           int
	elapsed         time.Duration
	first           []string // the first few errors
	callLat         []time.Duration
}

func (c *createStats) add(o createStats) {
	c.created += o.created
	c.failed += o.failed
	c.calls += o.calls
	c.callLat = append(c.callLat, o.callLat...)
	for _, e := range o.first {
		if len(c.first) < 5 {
			c.first = append(c.first, e)
		}
	}
}

func (c *createStats) rate() float64 {
	if c.elapsed <= 0 {
		return 0
	}
	return float64(c.created) / c.elapsed.Seconds()
}

// execJob is a one-shot no-op (exec /bin/true) pinned to the agent.
func execJob(name string, sched schedule.Spec) protocol.Job {
	return protocol.Job{Name: name, Handler: "exec", Payload: json.RawMessage(`{"command":"/bin/true"}`),
		Schedule: sched, Target: protocol.Target{Agent: agentID}}
}

// httpJob is a GET of the bench's sink pinned to the agent.
func httpJob(name, sinkURL string, sched schedule.Spec) protocol.Job {
	p, _ := json.Marshal(map[string]string{"method": "GET", "url": sinkURL + "/hit"})
	return protocol.Job{Name: name, Handler: "http", Payload: p, Schedule: sched, Target: protocol.Target{Agent: agentID}}
}

// createBatch sends one POST /v1/jobs:batch and counts its results.
func (s *system) createBatch(ctx context.Context, jobs []protocol.Job) createStats {
	var st createStats
	t0 := time.Now()
	res, err := s.cl.CreateJobs(ctx, jobs)
	st.calls = 1
	st.callLat = []time.Duration{time.Since(t0)}
	if err != nil {
		st.failed = len(jobs)
		st.first = []string{fmt.Sprintf("batch of %d: %v", len(jobs), err)}
		return st
	}
	for i, r := range res {
		if r.Err != nil {
			st.failed++
			if len(st.first) < 5 {
				st.first = append(st.first, fmt.Sprintf("job %s: %v", jobs[i].Name, r.Err))
			}
			continue
		}
		st.created++
	}
	return st
}

// createMany creates n jobs made by mk in batches of batch, inflight calls
// at a time, printing progress every 10 s.
func (s *system) createMany(ctx context.Context, n, batch, inflight int, mk func(i int) protocol.Job) createStats {
	type span struct{ lo, hi int }
	work := make(chan span)
	results := make(chan createStats)
	var wg sync.WaitGroup
	for range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sp := range work {
				jobs := make([]protocol.Job, 0, sp.hi-sp.lo)
				for i := sp.lo; i < sp.hi; i++ {
					jobs = append(jobs, mk(i))
				}
				results <- s.createBatch(ctx, jobs)
			}
		}()
	}
	go func() {
		defer close(work)
		for lo := 0; lo < n; lo += batch {
			select {
			case work <- span{lo, min(lo+batch, n)}:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()
	var total createStats
	t0 := time.Now()
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case r, ok := <-results:
			if !ok {
				total.elapsed = time.Since(t0)
				return total
			}
			total.add(r)
		case <-tick.C:
			fmt.Printf("  create: %d created, %d failed after %.0fs (%.0f/s)\n", total.created, total.failed,
				time.Since(t0).Seconds(), float64(total.created)/time.Since(t0).Seconds())
		}
	}
}

// latStats are percentiles of a set of durations.
type latStats struct {
	n             int
	p50, p99, max time.Duration
	errs          int
	firstErr      string
}

func summarize(ds []time.Duration) latStats {
	if len(ds) == 0 {
		return latStats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return latStats{n: len(s), p50: at(0.50), p99: at(0.99), max: s[len(s)-1]}
}

func (l latStats) String() string {
	out := fmt.Sprintf("p50 %s  p99 %s  max %s  (n=%d)", ms(l.p50), ms(l.p99), ms(l.max), l.n)
	if l.errs > 0 {
		out += fmt.Sprintf("  ERRORS %d: %s", l.errs, l.firstErr)
	}
	return out
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }
