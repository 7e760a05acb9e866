package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
	"github.com/axsched/ax/internal/testutil"
)

// Agents in child processes: the test binary runs again as
// TestHelperAgentProcess, a real agent (SQLite store, NATS link) whose
// "record" handler appends one line per run to a shared fire file. The
// parent can SIGKILL it like any agent process.

const (
	envAgentID     = "AX_E2E_AGENT_ID"
	envAgentURL    = "AX_E2E_AGENT_URL"
	envAgentDir    = "AX_E2E_AGENT_DIR"
	envAgentLabels = "AX_E2E_AGENT_LABELS" // k=v,k=v
	envAgentFires  = "AX_E2E_AGENT_FIRES"
	envAgentHold   = "AX_E2E_AGENT_HOLD" // how long a run lasts after its line (Go duration)
	// Optional: exec.allow and http.allow (comma-separated), and the run
	// log of TestFaultInjection's "faultrun" handler (fault_runlog_test.go).
	envAgentExecAllow = "AX_E2E_AGENT_EXEC_ALLOW"
	envAgentHTTPAllow = "AX_E2E_AGENT_HTTP_ALLOW"
	envAgentRunLog    = "AX_E2E_AGENT_RUNLOG"
	envAgentWorkers   = "AX_E2E_AGENT_WORKERS"    // workers
	envAgentQueueSize = "AX_E2E_AGENT_QUEUE_SIZE" // queue.size
)

// fileHandler appends "agent exec_id attempt epoch unix_nanos\n" to path
// for every run, in one write on a file opened with O_APPEND, so that
// several processes can share the file; the run then lasts hold (the
// handler's work, cut short when its context ends).
func fileHandler(tb testing.TB, agentID, path string, hold time.Duration) agent.HandlerFunc {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		tb.Fatalf("open fire file: %v", err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return func(ctx context.Context, t agent.Task) agent.Result {
		line := fmt.Sprintf("%s %s %d %d %d\n", agentID, t.ExecID, t.Attempt, t.Epoch, time.Now().UnixNano())
		if _, err := f.Write([]byte(line)); err != nil {
			return agent.Result{Code: 1, Message: err.Error(), Retryable: true}
		}
		if hold > 0 {
			tm := time.NewTimer(hold)
			defer tm.Stop()
			select {
			case <-tm.C:
			case <-ctx.Done():
			}
		}
		return agent.Result{}
	}
}

// readFires parses a fire file; a last line still being written (no
// newline yet) is left out.
func readFires(tb testing.TB, path string) []groupFire {
	tb.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		tb.Fatalf("read fire file: %v", err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var out []groupFire
	for n, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if l == "" {
			continue
		}
		fs := strings.Fields(l)
		if len(fs) != 5 {
			tb.Fatalf("fire file line %d: %q", n+1, l)
		}
		attempt, err1 := strconv.Atoi(fs[2])
		epoch, err2 := strconv.ParseUint(fs[3], 10, 64)
		ns, err3 := strconv.ParseInt(fs[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			tb.Fatalf("fire file line %d: %q", n+1, l)
		}
		out = append(out, groupFire{agent: fs[0], execID: fs[1], attempt: attempt, epoch: epoch, at: time.Unix(0, ns)})
	}
	return out
}

// TestHelperAgentProcess is not a test: startAgentProc runs the test
// binary again with it to get an agent in a process it can SIGKILL.
func TestHelperAgentProcess(t *testing.T) {
	id := testutil.ChildEnv(t, envAgentID, "the failover tests")
	labels := map[string]string{}
	for kv := range strings.SplitSeq(os.Getenv(envAgentLabels), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			labels[k] = v
		}
	}
	hold, _ := time.ParseDuration(os.Getenv(envAgentHold))
	cfg := agentConfig(id, os.Getenv(envAgentURL), os.Getenv(envAgentDir), labels)
	if v := os.Getenv(envAgentExecAllow); v != "" {
		cfg.Exec.Allow = strings.Split(v, ",")
	}
	if v := os.Getenv(envAgentHTTPAllow); v != "" {
		cfg.HTTP.Allow = strings.Split(v, ",")
	}
	if n, err := strconv.Atoi(os.Getenv(envAgentWorkers)); err == nil {
		cfg.Workers = n
	}
	if n, err := strconv.Atoi(os.Getenv(envAgentQueueSize)); err == nil {
		cfg.Queue.Size = n
	}
	opts := []agent.Option{agent.WithLogger(testutil.Logger().With("who", id)),
		agent.WithHandler("record", fileHandler(t, id, os.Getenv(envAgentFires), hold))}
	if v := os.Getenv(envAgentRunLog); v != "" {
		opts = append(opts, agent.WithHandler(faultHandlerName, faultHandler(t, id, v)))
	}
	runAgentChild(agent.New(cfg, opts...))
}

// runAgentChild runs a (or reports err) as the body of a child process:
// it exits when the parent, which holds its stdin, goes away (even when
// killed), prints READY once the agent is made, and exits 0 when the agent
// stops; an error is printed as "ERROR ..." with exit code 2.
func runAgentChild(a *agent.Agent, err error) {
	if err != nil {
		testutil.ChildFail(err)
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(3)
	}()
	fmt.Println("READY")
	if err := a.Run(context.Background()); err != nil {
		testutil.ChildFail(err)
	}
	os.Exit(0)
}

// agentProc is an agent running in a child process.
type agentProc struct {
	id string
	*testutil.Child
}

// startAgentProc starts agent id in a child process (store in a fresh
// temp dir, NATS at url, labels k=v,...) recording its runs of the
// "record" handler in fires (each run lasting hold), and waits until it
// has started.
func startAgentProc(tb testing.TB, id, url, labels, fires string, hold time.Duration) *agentProc {
	tb.Helper()
	return startAgentProcIn(tb, id, url, labels, fires, tb.TempDir(), hold)
}

// startAgentProcIn is startAgentProc with the agent's store in dir (a
// restart on the same store) and extra environment (the optional
// envAgent* settings).
func startAgentProcIn(tb testing.TB, id, url, labels, fires, dir string, hold time.Duration, extra ...string) *agentProc {
	tb.Helper()
	return &agentProc{id: id, Child: testutil.StartChild(tb, "TestHelperAgentProcess", agentProcEnv(id, url, labels, fires, dir, hold, extra...), 60*time.Second)}
}

// tryStartAgentProcIn is startAgentProcIn for an agent that may fail to
// start: it returns the helper's ERROR line ("" when it started).
func tryStartAgentProcIn(tb testing.TB, id, url, labels, fires, dir string, hold time.Duration, extra ...string) (*agentProc, string) {
	tb.Helper()
	c, line := testutil.TryStartChild(tb, "TestHelperAgentProcess", agentProcEnv(id, url, labels, fires, dir, hold, extra...), 60*time.Second)
	return &agentProc{id: id, Child: c}, line
}

// agentProcEnv is the environment of TestHelperAgentProcess.
func agentProcEnv(id, url, labels, fires, dir string, hold time.Duration, extra ...string) []string {
	return append([]string{envAgentID + "=" + id, envAgentURL + "=" + url, envAgentDir + "=" + dir,
		envAgentLabels + "=" + labels, envAgentFires + "=" + fires, envAgentHold + "=" + hold.String()}, extra...)
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *agentProc) kill() { p.Kill() }
