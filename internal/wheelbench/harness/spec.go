package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"time"
)

// Kinds of measurement.
const (
	KindPending  = "pending"  // insert N tasks: ns per insert and bytes per task
	KindLateness = "lateness" // N tasks due soon: how late they fire
	KindIdle     = "idle"     // hold N tasks: CPU used while waiting
)

// Modes (contenders).
const (
	ModeWheel      = "wheel"       // the deterministic core, one goroutine
	ModeDriver     = "driver"      // wheel.Driver on the system clock, deadlines from one clock read
	ModeDriverNow  = "driver-now"  // wheel.Driver, one time.Now() per insert to make the deadline
	ModeDriverFine = "driver-fine" // wheel.Driver with FineConfig
	ModeAfterFunc  = "afterfunc"   // time.AfterFunc per task
	ModeGoroutine  = "goroutine"   // go func() { time.Sleep(d); fire() }()
	ModeBaseline   = "baseline"    // nothing (idle only)
	ModeEmpty      = "driver-empty"
)

// Spec describes one measurement.
type Spec struct {
	Kind     string
	Mode     string
	N        int
	MinDelay time.Duration
	MaxDelay time.Duration
	Idle     time.Duration // KindIdle: how long to wait
	Seed     uint64
}

// Result is what a child reports.
type Result struct {
	Spec Spec
	// Insert cost is process CPU time (user+sys, all threads: GC workers
	// included) per insert, which descheduling by other processes does
	// not inflate; WallPerInsert is elapsed time per insert.
	NsPerInsert     float64 // median over refills in the same process (warm heap)
	NsPerInsertCold float64 // the first fill of a fresh process (page faults included)
	WallPerInsert   float64 // elapsed time, median over the refills
	Reps            int     // refills measured
	BytesPerTask    float64 // heap+stack in use per task, minus TaskSize
	P50, P99        time.Duration
	Max             time.Duration
	Early           int
	Fired           int
	CPU             time.Duration // user+system during the idle window
	Err             string
}

const childEnv = "AX_WHEELBENCH_CHILD"

// IsChild reports whether this process was started by Spawn.
func IsChild() bool { return os.Getenv(childEnv) != "" }

// RunChild runs the measurement Spawn asked for and writes its Result to
// stdout as JSON. Call it first thing in main (or TestMain) when IsChild.
func RunChild() {
	var s Spec
	var r Result
	if err := json.Unmarshal([]byte(os.Getenv(childEnv)), &s); err != nil {
		r.Err = fmt.Sprintf("decode spec: %v", err)
	} else {
		r = run(s)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "encode result:", err)
		os.Exit(1)
	}
}

// Spawn runs s in a child process (this executable, re-run) and returns
// its Result.
func Spawn(s Spec) (Result, error) {
	exe, err := os.Executable()
	if err != nil {
		return Result{}, fmt.Errorf("find executable: %w", err)
	}
	js, err := json.Marshal(s)
	if err != nil {
		return Result{}, fmt.Errorf("encode spec: %w", err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(js))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return Result{}, fmt.Errorf("child %s/%s/%d: %w: %s", s.Kind, s.Mode, s.N, err, errb.String())
	}
	var r Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return Result{}, fmt.Errorf("child %s/%s/%d: decode result: %w: %q", s.Kind, s.Mode, s.N, err, out.String())
	}
	if r.Err != "" {
		return r, fmt.Errorf("child %s/%s/%d: %s", s.Kind, s.Mode, s.N, r.Err)
	}
	return r, nil
}
