package main

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

// cpuOf returns the user+system CPU time the processes used so far.
func cpuOf(pids ...int) (time.Duration, error) {
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

// rssOf returns the resident set size of a process in MiB.
func rssOf(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// proc is a child process this command started and stops.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
}

// start runs name with args, its output in logPath.
func start(name, logPath string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &proc{name: name, cmd: cmd, log: f}, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM, waits up to 10 s, then kills.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.log.Close()
}

// poll calls cond every 20 ms until it holds, ctx ends or d passes.
func poll(ctx context.Context, d time.Duration, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
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
