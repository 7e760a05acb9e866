package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// pidGone reports whether pid no longer runs (absent or a zombie).
func pidGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// pid (comm) S ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func TestExecTimeoutKillsProcessGroup(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-x", c.srv.URL())
	cfg.Exec.Allow = []string{"/bin/sh"}
	startAgent(t, cfg)
	pidFile := tempFile(t, "child.pid")
	// The child ignores SIGTERM and outlives its parent unless the group is killed.
	script := `trap "" TERM; sleep 300 & echo $! > ` + pidFile + `; wait`
	j := newJob("edge-x", "exec", schedule.Spec{Asap: true}, map[string]any{"command": "/bin/sh", "args": []string{"-c", script}})
	j.Timeout = protocol.Duration(300 * time.Millisecond)
	cmd := runCmd(j, 1, time.Now())
	c.send("edge-x", cmd)
	fin := waitFinished(t, c, 15*time.Second, cmd.Run.ExecID)
	if fin.Outcome != retry.OutcomeTimeout {
		t.Fatalf("outcome = %s (%+v), want timeout", fin.Outcome, fin.Result)
	}
	b, err := os.ReadFile(pidFile)
	must(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	waitFor(t, 20*time.Second, "grandchild gone", func() bool { return pidGone(pid) })
}

func TestExecOutsideAllowlistNeverStarts(t *testing.T) {
	c := startCtl(t)
	cfg := testConfig(t, "edge-a", c.srv.URL())
	cfg.Exec.Allow = []string{"/bin/echo", "/opt/ax/bin/*"}
	startAgent(t, cfg)
	marker := tempFile(t, "marker")
	tests := []struct {
		name    string
		payload map[string]any
		want    string
	}{
		{"not listed", map[string]any{"command": "/usr/bin/touch", "args": []string{marker}}, "not in exec.allow"},
		// A controller refuses these two at the create (pkg/payload); the
		// agent refuses them too, for a command that did not pass there.
		{"dot-dot escape of a glob", map[string]any{"command": "/opt/ax/bin/../../../usr/bin/touch", "args": []string{marker}}, "must be an absolute, clean path"},
		{"relative path", map[string]any{"command": "touch", "args": []string{marker}}, "must be an absolute, clean path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob("edge-a", "exec", schedule.Spec{Asap: true}, tc.payload)
			cmd := runCmd(j, 1, time.Now())
			c.send("edge-a", cmd)
			fin := waitFinished(t, c, 10*time.Second, cmd.Run.ExecID)
			if fin.Outcome != retry.OutcomeFailure || fin.Result.Retryable {
				t.Fatalf("outcome %s retryable %v, want failure not retryable", fin.Outcome, fin.Result.Retryable)
			}
			if !strings.Contains(fin.Result.Message, tc.want) {
				t.Fatalf("message = %q", fin.Result.Message)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the command ran: %v", err)
			}
		})
	}
	// An allowed command runs, with the AX_* environment and stdin.
	j := newJob("edge-a", "exec", schedule.Spec{Asap: true}, map[string]any{"command": "/bin/echo", "args": []string{"hello"}})
	cmd := runCmd(j, 1, time.Now())
	c.send("edge-a", cmd)
	fin := waitFinished(t, c, 10*time.Second, cmd.Run.ExecID)
	if fin.Outcome != retry.OutcomeSuccess || !strings.Contains(fin.Result.Message, "hello") {
		t.Fatalf("allowed command: %s %+v", fin.Outcome, fin.Result)
	}
}

// TestExecPayloadEnvCannotRunCode: an allowed bash script given BASH_ENV
// with stdin, an exported function or PATH in the payload's env would run
// code of the controller's choosing. None of these names is in the
// agent's exec.env_allow (empty by default): the job fails, not
// retryable, naming the variable, and the injected code does not run.
func TestExecPayloadEnvCannotRunCode(t *testing.T) {
	c := startCtl(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "job.sh")
	must(t, os.WriteFile(script, []byte("#!/bin/bash\necho hello\ndate >/dev/null\n"), 0o755))
	evil := filepath.Join(dir, "evil")
	must(t, os.MkdirAll(evil, 0o755))
	marker := filepath.Join(dir, "injected.ran")
	must(t, os.WriteFile(filepath.Join(evil, "date"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755))
	cfg := testConfig(t, "edge-env", c.srv.URL())
	cfg.Exec.Allow = []string{script}
	startAgent(t, cfg)
	for _, tc := range []struct {
		name, variable string
		payload        map[string]any
	}{
		{"BASH_ENV from stdin", "BASH_ENV", map[string]any{"command": script, "env": map[string]string{"BASH_ENV": "/dev/stdin"}, "stdin": "touch " + marker}},
		{"exported function", "BASH_FUNC_echo%%", map[string]any{"command": script, "env": map[string]string{"BASH_FUNC_echo%%": "() { touch " + marker + "; }"}}},
		{"PATH", "PATH", map[string]any{"command": script, "env": map[string]string{"PATH": evil + ":/usr/bin:/bin"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob("edge-env", "exec", schedule.Spec{Asap: true}, tc.payload)
			cmd := runCmd(j, 1, time.Now())
			c.send("edge-env", cmd)
			fin := waitFinished(t, c, 10*time.Second, cmd.Run.ExecID)
			if fin.Outcome != retry.OutcomeFailure || fin.Result.Retryable || !strings.Contains(fin.Result.Message, tc.variable+" is not in exec.env_allow") {
				t.Errorf("outcome %s %+v, want failure, not retryable, naming %s", fin.Outcome, fin.Result, tc.variable)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("the injected code ran: %v", err)
			}
		})
	}
}
