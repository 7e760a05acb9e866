package testutil

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Child is the test binary run again as a helper process with one test
// selected (a controller or an agent that a test can SIGKILL). The helper
// test prints READY when it is up, or a line starting with ERROR.
type Child struct {
	// Cmd is the running process.
	Cmd    *exec.Cmd
	done   chan struct{}
	killed atomic.Bool // Kill was called
	// errLine is the ERROR line the helper printed once up (its Run
	// failed), read by ErrorLine once done is closed.
	errLine string
}

// StartChild runs the test binary with only test name selected and env
// added to the environment, and waits up to timeout for its READY line.
// Its stdin is a pipe that closes when this process dies, so a helper can
// exit by itself then. The child is killed when the test ends.
func StartChild(tb testing.TB, name string, env []string, timeout time.Duration) *Child {
	tb.Helper()
	c, line := TryStartChild(tb, name, env, timeout)
	if line != "" {
		tb.Fatalf("%s process: %q", name, line)
	}
	return c
}

// TryStartChild is StartChild, except that a helper that printed an ERROR
// line is not fatal: that line is returned (the process has exited or is
// killed when the test ends). Other failures to start are fatal.
func TryStartChild(tb testing.TB, name string, env []string, timeout time.Duration) (*Child, string) {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+name+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	if _, err := cmd.StdinPipe(); err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	c := &Child{Cmd: cmd, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		up := false
		for sc.Scan() {
			l := sc.Text()
			if up && strings.HasPrefix(l, "ERROR") {
				// A helper that fails once up: said on stderr, or a test
				// that finds it gone later could not tell why.
				fmt.Fprintf(os.Stderr, "%s process (pid %d): %s\n", name, cmd.Process.Pid, l)
				c.errLine = l
			}
			if l == "READY" || strings.HasPrefix(l, "ERROR") {
				up = up || l == "READY"
				select {
				case ready <- l:
				default:
				}
			}
		}
		err := cmd.Wait()
		if up && !c.killed.Load() {
			fmt.Fprintf(os.Stderr, "%s process (pid %d) exited, not by Kill, at %s: %v\n", name, cmd.Process.Pid,
				time.Now().Format("15:04:05.000"), err)
		}
		close(c.done)
	}()
	tb.Cleanup(c.Kill)
	select {
	case l := <-ready:
		if l != "READY" {
			return c, l
		}
	case <-c.done:
		tb.Fatalf("%s process exited before it was ready", name)
	case <-time.After(timeout):
		tb.Fatalf("%s process not ready in %s", name, timeout)
	}
	return c, ""
}

// Kill sends SIGKILL and waits until the process is gone.
func (c *Child) Kill() {
	c.killed.Store(true)
	_ = c.Cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// Signal sends sig to the process (SIGSTOP freezes it).
func (c *Child) Signal(sig os.Signal) error { return c.Cmd.Process.Signal(sig) }

// Done is closed when the process has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// ErrorLine returns the ERROR line the helper printed after READY (its
// agent or controller failed once up), "" when it printed none. It waits
// until the process has exited.
func (c *Child) ErrorLine() string {
	<-c.done
	return c.errLine
}

// ExitCode returns the process's exit code, -1 when a signal ended it. It
// waits until the process has exited.
func (c *Child) ExitCode() int {
	<-c.done
	return c.Cmd.ProcessState.ExitCode()
}

// ChildEnv returns the environment variable key that the parent test set
// for a helper process (StartChild's env); when it is empty the helper
// test runs as an ordinary test and is skipped, with a message naming of,
// the tests the helper serves.
func ChildEnv(tb testing.TB, key, of string) string {
	tb.Helper()
	v := os.Getenv(key)
	if v == "" {
		tb.Skip("helper process of " + of)
	}
	return v
}

// ChildFail ends a helper process that could not start: it prints
// "ERROR err", the line StartChild fails the test with, and exits 2.
func ChildFail(err error) {
	fmt.Println("ERROR", err)
	os.Exit(2)
}

// RunChild is the body of a helper process that StartChild runs and kills:
// it calls start with a context that ends after a minute (ChildFail when
// start fails), prints READY and waits to be killed, exiting 3 after a
// two-minute watchdog. It does not return.
func RunChild(start func(ctx context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := start(ctx); err != nil {
		ChildFail(err)
	}
	fmt.Println("READY")
	<-time.After(2 * time.Minute) // watchdog: the parent kills us long before
	os.Exit(3)
}
