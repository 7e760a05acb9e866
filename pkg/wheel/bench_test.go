package wheel_test

// Benchmarks against time.AfterFunc and one goroutine per task + time.Sleep,
// side by side in one run. The Pending, Lateness and Idle benchmarks run
// each measurement in a child process (see internal/wheelbench/harness) and
// report through b.ReportMetric; run them once each:
//
//	go test -run '^$' -bench . -benchtime 1x ./pkg/wheel
//
// internal/wheelbench prints the same figures as a table with the budgets.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/axsched/ax/internal/wheelbench/harness"
	"github.com/axsched/ax/pkg/wheel"
)

func TestMain(m *testing.M) {
	if harness.IsChild() {
		harness.RunChild()
		return
	}
	os.Exit(m.Run())
}

var benchDelays = func() []time.Duration {
	rng := rand.New(rand.NewPCG(1, 2))
	ds := make([]time.Duration, 1<<16)
	for i := range ds {
		ds[i] = time.Second + time.Duration(rng.Int64N(int64(2*time.Hour-time.Second)))
	}
	return ds
}()

// BenchmarkAdd measures one insert, with b.N tasks pending at the end and
// delays spread over 1 s–2 h.
func BenchmarkAdd(b *testing.B) {
	b.Run("wheel", func(b *testing.B) {
		w, err := wheel.New[harness.Task](wheel.DefaultConfig(), time.Now())
		if err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			w.Add(now.Add(benchDelays[i&(1<<16-1)]), harness.Task{ID: uint64(i)})
		}
	})
	for _, perInsertNow := range []bool{false, true} {
		name := "driver"
		if perInsertNow {
			name = "driver-now" // one time.Now() per insert
		}
		b.Run(name, func(b *testing.B) {
			d, err := wheel.NewDriver(wheel.DefaultConfig(), wheel.SystemClock(), func(harness.Task) {})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { d.Run(ctx); close(done) }()
			now := time.Now()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if perInsertNow {
					now = time.Now()
				}
				d.Add(now.Add(benchDelays[i&(1<<16-1)]), harness.Task{ID: uint64(i)})
			}
			b.StopTimer()
			cancel()
			<-done
		})
	}
	b.Run("afterfunc", func(b *testing.B) {
		ts := make([]*time.Timer, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t := &harness.Task{ID: uint64(i)}
			ts = append(ts, time.AfterFunc(benchDelays[i&(1<<16-1)], func() { _ = t }))
		}
		b.StopTimer()
		for _, t := range ts {
			t.Stop()
		}
	})
}

func spawn(b *testing.B, s harness.Spec) harness.Result {
	b.Helper()
	if testing.Short() {
		b.Skip("spawns child processes; skipped in -short mode")
	}
	var r harness.Result
	for i := 0; i < b.N; i++ {
		var err error
		if r, err = harness.Spawn(s); err != nil {
			b.Fatal(err)
		}
	}
	return r
}

// BenchmarkPending holds 100k, 500k and 1M tasks with delays over 1 s–2 h
// in each contender and reports bytes per task above the task's 80 bytes
// (HeapInuse+StackInuse after GC) and process CPU ns per insert: the
// median of refills in one process ("ns/insert") and the first fill of the
// fresh process ("ns/insert-cold", page faults included), plus elapsed
// ns per insert of the refills ("wall-ns/insert").
func BenchmarkPending(b *testing.B) {
	modes := []string{harness.ModeWheel, harness.ModeDriver, harness.ModeDriverNow, harness.ModeAfterFunc, harness.ModeGoroutine}
	for _, n := range []int{100_000, 500_000, 1_000_000} {
		for _, mode := range modes {
			b.Run(fmt.Sprintf("n=%d/%s", n, mode), func(b *testing.B) {
				r := spawn(b, harness.Spec{Kind: harness.KindPending, Mode: mode, N: n,
					MinDelay: time.Second, MaxDelay: 2 * time.Hour, Seed: 1})
				b.ReportMetric(r.BytesPerTask, "B/task")
				b.ReportMetric(r.NsPerInsert, "ns/insert")
				b.ReportMetric(r.NsPerInsertCold, "ns/insert-cold")
				b.ReportMetric(r.WallPerInsert, "wall-ns/insert")
			})
		}
	}
}

// BenchmarkLateness fires 100k tasks due within 0.5–3 s and reports how
// late they fire (p50, p99, max in ms) and how many fired early.
func BenchmarkLateness(b *testing.B) {
	for _, mode := range []string{harness.ModeDriver, harness.ModeDriverFine, harness.ModeAfterFunc, harness.ModeGoroutine} {
		b.Run(mode, func(b *testing.B) {
			r := spawn(b, harness.Spec{Kind: harness.KindLateness, Mode: mode, N: 100_000,
				MinDelay: 500 * time.Millisecond, MaxDelay: 3 * time.Second, Seed: 1})
			b.ReportMetric(float64(r.P50)/1e6, "p50-ms")
			b.ReportMetric(float64(r.P99)/1e6, "p99-ms")
			b.ReportMetric(float64(r.Max)/1e6, "max-ms")
			b.ReportMetric(float64(r.Early), "early")
		})
	}
}

// BenchmarkIdle holds 1M tasks (delays over 1 s–2 h) and reports the CPU
// the process spends over 5 s of waiting.
func BenchmarkIdle(b *testing.B) {
	runs := []struct {
		mode string
		n    int
	}{{harness.ModeBaseline, 0}, {harness.ModeEmpty, 0}, {harness.ModeDriver, 1_000_000}, {harness.ModeAfterFunc, 1_000_000}}
	for _, r := range runs {
		b.Run(fmt.Sprintf("%s/n=%d", r.mode, r.n), func(b *testing.B) {
			res := spawn(b, harness.Spec{Kind: harness.KindIdle, Mode: r.mode, N: r.n,
				MinDelay: time.Second, MaxDelay: 2 * time.Hour, Idle: 5 * time.Second, Seed: 1})
			b.ReportMetric(float64(res.CPU)/1e6, "cpu-ms")
			b.ReportMetric(float64(res.Fired), "fired")
		})
	}
}
