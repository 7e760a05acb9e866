package main

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/axsched/ax/internal/wheelbench/harness"
)

const (
	budgetBytes = 16.0                 // B per pending task above the task
	tickSlack   = 2 * time.Millisecond // p99 lateness budget above one tick
)

func runAll(out io.Writer, o options) error {
	fmt.Fprintf(out, "wheelbench: %s %s/%s, %d CPUs, task %d B, delays uniform over 1s–2h\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), harness.TaskSize)
	var verdicts []string

	if o.runs["pending"] {
		v, err := runPending(out, o)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, v...)
	}
	if o.runs["lateness"] {
		v, err := runLateness(out, o)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, v...)
	}
	if o.runs["idle"] {
		v, err := runIdle(out, o)
		if err != nil {
			return err
		}
		verdicts = append(verdicts, v...)
	}
	fmt.Fprintln(out, "\n## Budgets (docs/architecture.md)")
	for _, v := range verdicts {
		fmt.Fprintln(out, v)
	}
	return nil
}

// runPending measures memory and insert cost at each size.
func runPending(out io.Writer, o options) ([]string, error) {
	var verdicts []string
	modes := []string{harness.ModeWheel, harness.ModeDriver, harness.ModeDriverNow, harness.ModeAfterFunc}
	if o.goroutines {
		modes = append(modes, harness.ModeGoroutine)
	}
	fmt.Fprintln(out, "## Pending tasks: memory and insert")
	fmt.Fprintln(out, "Each row is one child process. B/task is from its first fill. ns/insert is process CPU time")
	fmt.Fprintln(out, "(getrusage user+sys, all threads) per insert: \"cold\" is the first fill of the fresh process (first-touch")
	fmt.Fprintln(out, "page faults included; they scale with bytes per task), \"warm\" the median of the refills that follow in")
	fmt.Fprintln(out, "the same process (budget figure); wall is elapsed time for the same refills. wheel and driver take")
	fmt.Fprintln(out, "deadlines computed from one clock read; driver-now pays one time.Now() per insert; time.AfterFunc reads")
	fmt.Fprintln(out, "the monotonic clock inside.")
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| pending | contender | B/task above task | CPU ns/insert warm | vs afterfunc | CPU ns/insert cold | vs afterfunc | wall ns/insert warm |")
	fmt.Fprintln(out, "|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, n := range o.ns {
		res := map[string]harness.Result{}
		for _, m := range modes {
			r, err := harness.Spawn(harness.Spec{Kind: harness.KindPending, Mode: m, N: n,
				MinDelay: time.Second, MaxDelay: 2 * time.Hour, Seed: o.seed})
			if err != nil {
				return nil, err
			}
			res[m] = r
		}
		af := res[harness.ModeAfterFunc]
		for _, m := range modes {
			r := res[m]
			ws, wr, ww := "-", "-", "-"
			if r.Reps > 0 {
				ws = fmt.Sprintf("%.1f (%d fills)", r.NsPerInsert, r.Reps)
				wr = fmt.Sprintf("%.2f×", r.NsPerInsert/af.NsPerInsert)
				ww = fmt.Sprintf("%.1f", r.WallPerInsert)
			}
			fmt.Fprintf(out, "| %d | %s | %.1f | %s | %s | %.1f | %.2f× | %s |\n", n, m, r.BytesPerTask, ws, wr,
				r.NsPerInsertCold, r.NsPerInsertCold/af.NsPerInsertCold, ww)
		}
		for _, m := range []string{harness.ModeWheel, harness.ModeDriver} {
			r := res[m]
			verdicts = append(verdicts,
				verdict(r.BytesPerTask <= budgetBytes, "memory %s n=%d: %.1f B/task (budget ≤ %.0f; afterfunc %.1f)",
					m, n, r.BytesPerTask, budgetBytes, af.BytesPerTask),
				verdict(r.NsPerInsert <= af.NsPerInsert/4, "insert %s n=%d: %.1f CPU ns warm (budget ≤ ¼ of afterfunc = %.1f ns; cold ratio %.2f×)",
					m, n, r.NsPerInsert, af.NsPerInsert/4, r.NsPerInsertCold/af.NsPerInsertCold))
		}
	}
	return verdicts, nil
}

// runLateness measures how late tasks due within 0.5–3 s fire.
func runLateness(out io.Writer, o options) ([]string, error) {
	var verdicts []string
	fmt.Fprintf(out, "\n## Lateness: %d tasks due within 0.5–3 s\n", o.latN)
	fmt.Fprintln(out, "| contender | tick | p50 | p99 | max | fired early | fired |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|")
	lmodes := []string{harness.ModeDriver, harness.ModeDriverFine, harness.ModeAfterFunc}
	if o.goroutines {
		lmodes = append(lmodes, harness.ModeGoroutine)
	}
	ticks := map[string]time.Duration{harness.ModeDriver: 10 * time.Millisecond, harness.ModeDriverFine: time.Millisecond}
	for _, m := range lmodes {
		r, err := harness.Spawn(harness.Spec{Kind: harness.KindLateness, Mode: m, N: o.latN,
			MinDelay: 500 * time.Millisecond, MaxDelay: 3 * time.Second, Seed: o.seed})
		if err != nil {
			return nil, err
		}
		tick := "-"
		if t, ok := ticks[m]; ok {
			tick = t.String()
			verdicts = append(verdicts,
				verdict(r.Early == 0, "never early %s: %d of %d fired early", m, r.Early, r.Fired),
				verdict(r.P99 <= t+tickSlack, "lateness %s: p99 %v (budget ≤ %v)", m, r.P99, t+tickSlack))
		}
		fmt.Fprintf(out, "| %s | %s | %v | %v | %v | %d | %d |\n", m, tick, r.P50, r.P99, r.Max, r.Early, r.Fired)
	}
	return verdicts, nil
}

// runIdle measures the CPU a process spends while its tasks wait.
func runIdle(out io.Writer, o options) ([]string, error) {
	var verdicts []string
	fmt.Fprintf(out, "\n## Idle CPU over %v (getrusage user+sys of the whole process)\n", o.idle)
	fmt.Fprintln(out, "| contender | pending | CPU | CPU per second | fired meanwhile |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|")
	type idleRun struct {
		mode string
		n    int
	}
	runs := []idleRun{{harness.ModeBaseline, 0}, {harness.ModeEmpty, 0},
		{harness.ModeDriver, o.idleN}, {harness.ModeAfterFunc, o.idleN}}
	if o.goroutines {
		runs = append(runs, idleRun{harness.ModeGoroutine, o.idleN})
	}
	cpu := map[string]time.Duration{}
	for _, ir := range runs {
		r, err := harness.Spawn(harness.Spec{Kind: harness.KindIdle, Mode: ir.mode, N: ir.n,
			MinDelay: time.Second, MaxDelay: 2 * time.Hour, Idle: o.idle, Seed: o.seed})
		if err != nil {
			return nil, err
		}
		cpu[ir.mode] = r.CPU
		fmt.Fprintf(out, "| %s | %d | %v | %v | %d |\n", ir.mode, ir.n, r.CPU.Round(time.Microsecond),
			(r.CPU / time.Duration(o.idle.Seconds()*1000) * 1000).Round(time.Microsecond), r.Fired)
	}
	verdicts = append(verdicts,
		verdict(cpu[harness.ModeDriver] <= cpu[harness.ModeAfterFunc], "idle CPU driver %v vs afterfunc %v with %d pending",
			cpu[harness.ModeDriver].Round(time.Microsecond), cpu[harness.ModeAfterFunc].Round(time.Microsecond), o.idleN),
		verdict(cpu[harness.ModeEmpty] <= cpu[harness.ModeAfterFunc], "idle CPU empty driver %v vs afterfunc %v",
			cpu[harness.ModeEmpty].Round(time.Microsecond), cpu[harness.ModeAfterFunc].Round(time.Microsecond)))
	return verdicts, nil
}

func verdict(ok bool, format string, args ...any) string {
	s := "PASS"
	if !ok {
		s = "FAIL"
	}
	return "- " + s + " " + fmt.Sprintf(format, args...)
}
