// Package proc holds what the bench commands share about the processes
// they start and measure: starting and stopping a child process with its
// output in a log file, a free loopback port, polling for a condition, and
// the CPU, memory and load figures Linux keeps under /proc.
package proc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// clkTck is USER_HZ, the unit of utime and stime in /proc/<pid>/stat (100
// on every Linux this runs on).
const clkTck = 100

// CPU returns the user+system CPU time the processes used so far.
func CPU(pids ...int) (time.Duration, error) {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, fmt.Errorf("read cpu of %d: %w", pid, err)
		}
		// The command name (field 2) may hold spaces; fields after ')' are fixed.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		ut, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return 0, fmt.Errorf("parse /proc/%d/stat", pid)
		}
		total += time.Duration(ut+st) * time.Second / clkTck
	}
	return total, nil
}

// Mem returns VmRSS and VmHWM of a process in MiB (0, 0 when gone).
func Mem(pid int) (rss, hwm float64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			hwm = kb / 1024
		}
	}
	return rss, hwm
}

// LoadAvg returns the first three fields of /proc/loadavg, the machine's
// load averages, or "?" when they cannot be read.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Poll calls cond every interval until it holds, ctx ends or d passes.
func Poll(ctx context.Context, d, interval time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		ok, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %v", what, d)
		case <-t.C:
		}
	}
}

// EnvWithout returns this process's environment without the variables
// whose names start with prefix, for Start.
func EnvWithout(prefix string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, prefix) {
			env = append(env, kv)
		}
	}
	return env
}

// Proc is a child process a bench command started and stops.
type Proc struct {
	cmd     *exec.Cmd
	log     *os.File
	started time.Time
	done    chan struct{}
}

// Start runs name with args, its stdout and stderr in logPath; env is its
// environment (nil: this process's).
func Start(name, logPath string, env []string, args ...string) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log %s: %w", logPath, err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = env
	p := &Proc{cmd: cmd, log: f, done: make(chan struct{}), started: time.Now()}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// PID returns the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Started returns when Start started the process.
func (p *Proc) Started() time.Time { return p.started }

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends sig and waits up to grace, then kills; it returns how long
// the process took to exit and whether it had to be killed.
func (p *Proc) Stop(sig os.Signal, grace time.Duration) (time.Duration, bool) {
	t0 := time.Now()
	_ = p.cmd.Process.Signal(sig)
	killed := false
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		killed = true
		<-p.done
	}
	p.log.Close()
	return time.Since(t0), killed
}

// Kill sends SIGKILL and waits for the exit.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
	p.log.Close()
}
