package controller

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// BenchmarkCreateOneShot measures a one-shot submit as the API's POST
// /v1/jobs does it (CreateJob: validate, store the job, its PENDING
// execution and its run command), from 8 goroutines, with the embedded
// server and its file store and a registered test agent as the target.
// One op is one job; cpu-µs/job is the whole process's CPU (controller and
// embedded server) per job. Run with -cpuprofile to see where it goes:
//
//	go test -run '^$' -bench BenchmarkCreateOneShot -benchtime 5000x -cpuprofile /tmp/create.prof ./controller/
//	go tool pprof -top /tmp/create.prof
func BenchmarkCreateOneShot(b *testing.B) {
	cfg := testConfig(b, b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	c := startController(b, cfg)
	a := newTestAgent(b, c.NATSURL(), "bench", nil)
	a.register()
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	b.ResetTimer()
	cpu0 := processCPU(b)
	start := time.Now()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := c.CreateJob(ctx, asapJob("bench")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/job")
}

// BenchmarkCreateOneShotBatch is BenchmarkCreateOneShot through CreateJobs
// (POST /v1/jobs:batch) in batches of 1000 from one caller: the creates
// of a batch are in flight together (batchParallel).
func BenchmarkCreateOneShotBatch(b *testing.B) {
	cfg := testConfig(b, b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	c := startController(b, cfg)
	a := newTestAgent(b, c.NATSURL(), "bench", nil)
	a.register()
	ctx := context.Background()
	b.ResetTimer()
	cpu0 := processCPU(b)
	start := time.Now()
	for done := 0; done < b.N; {
		n := min(MaxBatchJobs, b.N-done)
		jobs := make([]protocol.Job, n)
		for i := range jobs {
			jobs[i] = asapJob("bench")
		}
		mustCreateJobs(b, ctx, c, jobs)
		done += n
	}
	elapsed := time.Since(start)
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/job")
}
