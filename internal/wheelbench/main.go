package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/internal/wheelbench/harness"
)

func main() {
	if harness.IsChild() {
		harness.RunChild()
		return
	}
	var o options
	flag.StringVar(&o.sizes, "n", "100000,500000,1000000", "pending-task counts for the memory and insert runs, comma-separated")
	flag.IntVar(&o.latN, "lateness-n", 100000, "tasks due within 0.5–3 s for the lateness run")
	flag.DurationVar(&o.idle, "idle", 5*time.Second, "how long to measure idle CPU")
	flag.IntVar(&o.idleN, "idle-n", 1000000, "pending tasks held during the idle run")
	flag.BoolVar(&o.goroutines, "goroutines", true, "include one-goroutine-per-task + time.Sleep")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the delay generator")
	flag.StringVar(&o.only, "only", "pending,lateness,idle", "which runs to do, comma-separated")
	flag.Parse()
	if err := o.parse(); err != nil {
		fmt.Fprintln(os.Stderr, "wheelbench:", err)
		os.Exit(2)
	}
	if err := runAll(os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "wheelbench:", err)
		os.Exit(1)
	}
}

type options struct {
	sizes      string
	ns         []int
	latN       int
	idle       time.Duration
	idleN      int
	goroutines bool
	seed       uint64
	only       string
	runs       map[string]bool
}

func (o *options) parse() error {
	for _, f := range strings.Split(o.sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-n: %q is not a positive count", f)
		}
		o.ns = append(o.ns, n)
	}
	o.runs = map[string]bool{}
	for _, f := range strings.Split(o.only, ",") {
		switch f = strings.TrimSpace(f); f {
		case "pending", "lateness", "idle":
			o.runs[f] = true
		default:
			return fmt.Errorf("-only: unknown run %q (want pending, lateness or idle)", f)
		}
	}
	if o.latN <= 0 {
		return fmt.Errorf("-lateness-n: %d is not positive", o.latN)
	}
	if o.idle <= 0 {
		return fmt.Errorf("-idle: %v is not positive", o.idle)
	}
	if o.idleN < 0 {
		return fmt.Errorf("-idle-n: %d is negative", o.idleN)
	}
	return nil
}
