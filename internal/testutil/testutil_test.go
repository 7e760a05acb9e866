package testutil

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// fatalTB records Fatalf and stops the calling goroutine the way testing.T
// does, so that a failing Eventually can be observed without failing this
// test. A real *testing.T cannot be made to fail and still pass.
type fatalTB struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fatalTB) message() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msg
}

// runFatal runs fn on its own goroutine (Fatalf ends it) and waits for it.
func runFatal(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	<-done
}

func TestEventually(t *testing.T) {
	t.Run("returns once cond holds", func(t *testing.T) {
		calls := 0
		Eventually(t, 30*time.Second, "third call", func() bool {
			calls++
			return calls == 3
		})
		if calls != 3 {
			t.Fatalf("cond called %d times, want 3", calls)
		}
	})
	t.Run("true at once calls cond once", func(t *testing.T) {
		calls := 0
		Eventually(t, 30*time.Second, "first call", func() bool { calls++; return true })
		if calls != 1 {
			t.Fatalf("cond called %d times, want 1", calls)
		}
	})
	t.Run("fails with what after the timeout", func(t *testing.T) {
		ftb := &fatalTB{TB: t}
		calls := 0
		runFatal(func() {
			Eventually(ftb, 30*time.Millisecond, "the impossible", func() bool { calls++; return false })
		})
		want := "timed out after 30ms waiting for the impossible"
		if got := ftb.message(); got != want {
			t.Fatalf("Fatalf message = %q, want %q", got, want)
		}
		if calls < 2 {
			t.Fatalf("cond called %d times, want it polled more than once", calls)
		}
	})
}

func TestEventuallyFuncBuildsWhatOnlyOnTimeout(t *testing.T) {
	built := 0
	what := func() string { built++; return "x" }

	calls := 0
	EventuallyFunc(t, 30*time.Second, what, func() bool { calls++; return calls == 2 })
	if built != 0 {
		t.Fatalf("what built %d times on success, want 0", built)
	}

	ftb := &fatalTB{TB: t}
	last := 0
	runFatal(func() {
		EventuallyFunc(ftb, 20*time.Millisecond, func() string { return fmt.Sprintf("state (last %d)", last) },
			func() bool { last++; return false })
	})
	if got := ftb.message(); !strings.HasSuffix(got, fmt.Sprintf("waiting for state (last %d)", last)) {
		t.Fatalf("Fatalf message = %q, want it to report the last state %d", got, last)
	}
}

func TestFreePort(t *testing.T) {
	p := FreePort(t)
	if p <= 0 || p > 65535 {
		t.Fatalf("FreePort = %d, want a TCP port", p)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", fmt.Sprint(p)))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", p, err)
	}
	_ = l.Close()
}

func TestContext(t *testing.T) {
	var ctx context.Context
	t.Run("inner", func(t *testing.T) {
		ctx = Context(t, time.Minute)
		dl, ok := ctx.Deadline()
		if !ok || time.Until(dl) <= 0 || time.Until(dl) > time.Minute {
			t.Fatalf("deadline = %v, %v; want within a minute from now", dl, ok)
		}
		if err := ctx.Err(); err != nil {
			t.Fatalf("ctx.Err() during the test = %v, want nil", err)
		}
	})
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Fatalf("ctx.Err() after the test = %v, want context.Canceled", err)
	}
}

func TestLogger(t *testing.T) {
	t.Setenv(LogEnv, "")
	if Logger().Enabled(context.Background(), slog.LevelError) {
		t.Fatalf("Logger with %s unset logs errors, want it to discard everything", LogEnv)
	}
	t.Setenv(LogEnv, "1")
	if !Logger().Enabled(context.Background(), slog.LevelDebug) {
		t.Fatalf("Logger with %s=1 drops debug, want debug on", LogEnv)
	}
}

func TestFilter(t *testing.T) {
	s := []int{1, 2, 3, 4, 5}
	even := Filter(s, func(v int) bool { return v%2 == 0 })
	if len(even) != 2 || even[0] != 2 || even[1] != 4 {
		t.Fatalf("Filter = %v, want [2 4]", even)
	}
	even[0] = 9
	if s[1] != 2 {
		t.Fatalf("Filter shares the input's array: %v", s)
	}
	if none := Filter(s, func(int) bool { return false }); none != nil {
		t.Fatalf("Filter of none = %v, want nil", none)
	}
}

func TestChildEnv(t *testing.T) {
	t.Setenv("AX_TESTUTIL_CHILD", "x")
	if v := ChildEnv(t, "AX_TESTUTIL_CHILD", "TestChildEnv"); v != "x" {
		t.Fatalf("ChildEnv = %q, want x", v)
	}
	t.Run("unset", func(t *testing.T) {
		ChildEnv(t, "AX_TESTUTIL_CHILD_UNSET", "TestChildEnv")
		t.Fatal("ChildEnv did not skip without its variable")
	})
}

// TestProcReferencedCountsWhatIsTouched clears this process's referenced
// bits, touches a fresh 8 MiB anonymous buffer page by page and expects
// ProcReferenced to count at least those 8 MiB as anonymous.
func TestProcReferencedCountsWhatIsTouched(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc smaps is Linux's")
	}
	pid := os.Getpid()
	if err := ClearRefs(pid); err != nil {
		t.Skipf("cannot clear refs here: %v", err)
	}
	before, err := ProcReferenced(pid)
	if err != nil {
		t.Fatal(err)
	}
	const size = 8 << 20
	buf := make([]byte, size)
	for i := 0; i < size; i += 4096 {
		buf[i] = 1
	}
	after, err := ProcReferenced(pid)
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(buf)
	if grew := after["anon"] - before["anon"]; grew < size/1024 {
		t.Fatalf("anonymous referenced grew by %d KiB after touching %d KiB (before %v, after %v)", grew, size/1024, before, after)
	}
	if after["file"] == 0 {
		t.Fatalf("no file-backed page referenced, though this test binary's code runs: %v", after)
	}
}
