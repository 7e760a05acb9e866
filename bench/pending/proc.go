package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Child processes and /proc readings, after bench/vsasynq/proc.go.

// memOf returns VmRSS and VmHWM of a process in MiB (0, 0 when gone).
func memOf(pid int) (rss, hwm float64) {
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

// duMiB returns the disk usage of dir in MiB, as du -sk reports it.
func duMiB(ctx context.Context, dir string) (float64, error) {
	out, err := exec.CommandContext(ctx, "du", "-sk", dir).Output()
	if err != nil {
		return 0, fmt.Errorf("du %s: %w", dir, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return 0, fmt.Errorf("du %s: empty output", dir)
	}
	kb, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0, fmt.Errorf("du %s: parse %q: %w", dir, f[0], err)
	}
	return kb / 1024, nil
}

// loadAvg returns /proc/loadavg's first three fields.
func loadAvg() string {
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

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// proc is a child process this command started and stops.
type proc struct {
	name    string
	cmd     *exec.Cmd
	log     *os.File
	started time.Time
	done    chan struct{}
}

// start runs name with args, its stdout and stderr in logPath.
func start(name, logPath string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log %s: %w", logPath, err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// Keep AX_* settings of the caller's shell out (AX_NATS_URL would make
	// serve use an external server).
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	p := &proc{name: name, cmd: cmd, log: f, done: make(chan struct{}), started: time.Now()}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to grace, then kills; it returns how
// long the process took to exit and whether it had to be killed.
func (p *proc) stop(grace time.Duration) (time.Duration, bool) {
	t0 := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
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

// kill sends SIGKILL and waits for the exit.
func (p *proc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
	p.log.Close()
}

// poll calls cond every interval until it holds, ctx ends or d passes.
func poll(ctx context.Context, d, interval time.Duration, what string, cond func() (bool, error)) error {
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
