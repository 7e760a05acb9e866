package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/bench/internal/proc"
)

// dispatch submits c.tasks one-shot tasks from c.clients goroutines and
// waits until the scheduler has recorded them all.
func dispatch(ctx context.Context, c config, s *sink, sys system) (result, error) {
	base, err := sys.recorded(ctx)
	if err != nil {
		return result{}, err
	}
	cpu0, err := proc.CPU(sys.pids()...)
	if err != nil {
		return result{}, err
	}
	main0 := mainCPU(sys)
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, c.clients)
	for range c.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(c.tasks) {
					return
				}
				if err := sys.submit(ctx, fmt.Sprintf("%s/hit?id=%d", s.url, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	submitted := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return result{}, fmt.Errorf("submit: %w", err)
	}
	if err := proc.Poll(ctx, 10*time.Minute, 20*time.Millisecond, "all recorded", func() (bool, error) {
		n, err := sys.recorded(ctx)
		return n-base >= c.tasks, err
	}); err != nil {
		return result{}, err
	}
	done := time.Since(t0)
	cpu1, err := proc.CPU(sys.pids()...)
	if err != nil {
		return result{}, err
	}
	_, dupes := s.snapshot()
	return withMainCPU(result{
		"submit/s":     float64(c.tasks) / submitted.Seconds(),
		"done/s":       float64(c.tasks) / done.Seconds(),
		"cpu-ms/exec":  float64(cpu1-cpu0) / float64(time.Millisecond) / float64(c.tasks),
		"handler-runs": float64(s.count()),
		"duplicates":   float64(dupes),
	}, sys, main0, c.tasks).with(sys.extra(ctx)), nil
}

// latency submits c.rate tasks a second for c.latencyFor and measures
// submit → handler start at the sink.
func latency(ctx context.Context, c config, s *sink, sys system) (result, error) {
	n := int(float64(c.rate) * c.latencyFor.Seconds())
	cpu0, err := proc.CPU(sys.pids()...)
	if err != nil {
		return result{}, err
	}
	work := make(chan string, n)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for u := range work {
				if err := sys.submit(ctx, u); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	tick := time.NewTicker(time.Second / time.Duration(c.rate))
	for range n {
		<-tick.C
		work <- fmt.Sprintf("%s/hit?t=%d", s.url, time.Now().UnixNano())
	}
	tick.Stop()
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return result{}, fmt.Errorf("submit: %w", err)
	default:
	}
	if err := proc.Poll(ctx, 5*time.Minute, 20*time.Millisecond, "all started", func() (bool, error) { return s.count() >= n, nil }); err != nil {
		return result{}, err
	}
	cpu1, err := proc.CPU(sys.pids()...)
	if err != nil {
		return result{}, err
	}
	lat, _ := s.snapshot()
	return result{
		"p50-ms":      ms(percentile(lat, 0.50)),
		"p99-ms":      ms(percentile(lat, 0.99)),
		"cpu-ms/exec": float64(cpu1-cpu0) / float64(time.Millisecond) / float64(n),
	}.with(sys.extra(ctx)), nil
}

// periodicRun measures handler runs per second of the periodic jobs over
// c.window after c.warmup.
func periodicRun(ctx context.Context, c config, s *sink, sys system) (result, error) {
	select {
	case <-time.After(c.warmup):
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	from := time.Now().Truncate(time.Second).Add(time.Second)
	select {
	case <-time.After(time.Until(from)):
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	cpu0, err := proc.CPU(sys.pids()...)
	if err != nil {
		return result{}, err
	}
	main0 := mainCPU(sys)
	to := from.Add(c.window)
	select {
	case <-time.After(time.Until(to)):
	case <-ctx.Done():
		return result{}, ctx.Err()
	}
	cpu1, err := proc.CPU(sys.pids()...)
	if err != nil {
		return result{}, err
	}
	runs := s.between(from, to)
	return withMainCPU(result{
		"done/s":      float64(runs) / c.window.Seconds(),
		"cpu-ms/exec": float64(cpu1-cpu0) / float64(time.Millisecond) / float64(max(runs, 1)),
	}, sys, main0, max(runs, 1)).with(sys.extra(ctx)), nil
}

// mainProc is a system whose main process (ax-controller: the scheduler
// with its embedded NATS server) is measured on its own too.
type mainProc interface{ mainPID() int }

// mainCPU is the CPU time the system's main process used so far (0 when
// the system has none).
func mainCPU(sys system) time.Duration {
	mp, ok := sys.(mainProc)
	if !ok {
		return 0
	}
	d, _ := proc.CPU(mp.mainPID())
	return d
}

// withMainCPU adds "main-cpu-ms/exec": the main process's CPU per
// execution since from.
func withMainCPU(r result, sys system, from time.Duration, n int) result {
	if _, ok := sys.(mainProc); ok {
		r["main-cpu-ms/exec"] = float64(mainCPU(sys)-from) / float64(time.Millisecond) / float64(n)
	}
	return r
}
