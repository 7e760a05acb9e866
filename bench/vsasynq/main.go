package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/bench/internal/proc"
)

// system is one scheduler under test.
type system interface {
	name() string
	// start starts fresh processes in dir; periodic > 0 also sets up that
	// many jobs firing every second whose handler GETs the sink.
	start(ctx context.Context, dir string, s *sink, periodic int) error
	// submit submits one one-shot task whose handler GETs url.
	submit(ctx context.Context, url string) error
	// recorded is how many successful outcomes the scheduler has recorded.
	recorded(ctx context.Context) (int, error)
	// extra is a short line of system-specific figures.
	extra(ctx context.Context) string
	pids() []int
	stop()
}

type config struct {
	binDir         string
	reps           int
	tasks, clients int
	rate           int
	latencyFor     time.Duration
	periodic       int
	warmup, window time.Duration
	workloads      string
	systems        string
	keep           bool
	pprof          string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "asynq-worker" {
		if err := asynqWorker(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "asynq-worker:", err)
			os.Exit(1)
		}
		return
	}
	var c config
	flag.StringVar(&c.binDir, "bin", "", "directory with ax-controller and ax-agent (bench/run.sh builds them)")
	flag.IntVar(&c.reps, "reps", 3, "repetitions (the two systems alternate in each)")
	flag.IntVar(&c.tasks, "tasks", 5000, "dispatch: one-shot tasks")
	flag.IntVar(&c.clients, "clients", 8, "dispatch: submitting clients")
	flag.IntVar(&c.rate, "rate", 400, "latency: tasks submitted per second")
	flag.DurationVar(&c.latencyFor, "latency-for", 10*time.Second, "latency: how long to submit")
	flag.IntVar(&c.periodic, "periodic", 2000, "periodic: jobs firing every second")
	flag.DurationVar(&c.warmup, "warmup", 5*time.Second, "periodic: warm-up before the window")
	flag.DurationVar(&c.window, "window", 20*time.Second, "periodic: measured window")
	flag.StringVar(&c.workloads, "workloads", "dispatch,latency,periodic", "workloads to run")
	flag.StringVar(&c.systems, "systems", "ax,asynq", "systems to run (ax, asynq)")
	flag.BoolVar(&c.keep, "keep", false, "keep the data directories and logs")
	flag.StringVar(&c.pprof, "ctl-pprof", "", "serve Go profiles of ax-controller on this loopback address (serve --pprof-listen)")
	flag.Parse()
	if c.binDir == "" {
		fmt.Fprintln(os.Stderr, "vsasynq: -bin is required (run bench/run.sh)")
		os.Exit(2)
	}
	if !haveRedis() {
		fmt.Fprintln(os.Stderr, "vsasynq: redis-server is not on PATH (bench/run.sh installs it)")
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "vsasynq:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	s, err := newSink()
	if err != nil {
		return err
	}
	var systems []system
	for _, name := range strings.Split(c.systems, ",") {
		switch name {
		case "ax":
			systems = append(systems, &axSystem{binDir: c.binDir, pprof: c.pprof})
		case "asynq":
			systems = append(systems, &asynqSystem{})
		default:
			return fmt.Errorf("-systems: unknown system %q (ax, asynq)", name)
		}
	}
	res := results{}
	fmt.Printf("# vsasynq: %d reps; load before: %s\n", c.reps, proc.LoadAvg())
	for rep := range c.reps {
		order := systems
		if rep%2 == 1 {
			order = slices.Clone(systems)
			slices.Reverse(order)
		}
		for _, w := range strings.Split(c.workloads, ",") {
			for _, sys := range order {
				r, err := runOne(ctx, c, s, sys, w)
				if err != nil {
					return fmt.Errorf("rep %d %s %s: %w", rep+1, w, sys.name(), err)
				}
				fmt.Printf("rep %d %-8s %-5s %s\n", rep+1, w, sys.name(), r)
				res.add(w, sys.name(), r)
			}
		}
	}
	fmt.Printf("# load after: %s\n\n", proc.LoadAvg())
	res.print(os.Stdout)
	return nil
}

// runOne starts sys fresh, runs workload w and stops it.
func runOne(ctx context.Context, c config, s *sink, sys system, w string) (result, error) {
	dir, err := os.MkdirTemp("", "vsasynq-"+sys.name()+"-")
	if err != nil {
		return result{}, err
	}
	if !c.keep {
		defer os.RemoveAll(dir)
	}
	periodic := 0
	if w == "periodic" {
		periodic = c.periodic
	}
	s.reset(w == "dispatch")
	defer sys.stop()
	if err := sys.start(ctx, dir, s, periodic); err != nil {
		return result{}, fmt.Errorf("%w (logs in %s)", err, keepDir(dir))
	}
	switch w {
	case "dispatch":
		return dispatch(ctx, c, s, sys)
	case "latency":
		return latency(ctx, c, s, sys)
	case "periodic":
		return periodicRun(ctx, c, s, sys)
	}
	return result{}, errors.New("unknown workload " + w)
}

// keepDir names dir for an error message (runOne removes it unless -keep).
func keepDir(dir string) string { return dir + ", rerun with -keep to keep it" }
