package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/agent"
)

// The run log of TestFaultInjection: every handler run, whatever runs it
// (a Go handler in an agent process, a shell script started by the exec
// handler, the test's HTTP server called by the http handler), appends
// two lines to one file opened with O_APPEND, each in one write:
//
//	agent exec_id attempt epoch start_ns - -            when the run starts
//	agent exec_id attempt epoch start_ns end_ns exit    when it ends
//
// A run killed with its agent has only the first line. exit is 0 for a
// success and faultExitRetry for a retryable failure (HTTP 503 for http).

const (
	// faultHandlerName is the Go handler of the fault test's agents.
	faultHandlerName = "faultrun"
	// faultExitRetry is the exit code of a failed run (EX_TEMPFAIL):
	// retryable for every handler kind.
	faultExitRetry = 75
)

// faultPayload is the payload of the Go handler: the run lasts HoldMS and
// fails (retryable) for FailPct percent of the (exec id, attempt) pairs,
// chosen by faultFails so that a run repeated is decided alike.
type faultPayload struct {
	FailPct int `json:"fail_pct"`
	HoldMS  int `json:"hold_ms"`
}

// faultFails reports whether the run of execID at attempt fails.
func faultFails(execID string, attempt, pct int) bool {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", execID, attempt)
	return int(h.Sum32()%100) < pct
}

// runLine is one line of the run log; end zero writes a start line.
func runLine(agentID, execID string, attempt int, epoch uint64, start, end time.Time, exit int) string {
	if end.IsZero() {
		return fmt.Sprintf("%s %s %d %d %d - -\n", agentID, execID, attempt, epoch, start.UnixNano())
	}
	return fmt.Sprintf("%s %s %d %d %d %d %d\n", agentID, execID, attempt, epoch, start.UnixNano(), end.UnixNano(), exit)
}

// faultHandler is the Go handler: it logs its start, holds (ending early
// when its context ends: exit 1, retryable), logs its end and returns.
func faultHandler(tb testing.TB, agentID, path string) agent.HandlerFunc {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		tb.Fatalf("open run log: %v", err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return func(ctx context.Context, t agent.Task) agent.Result {
		start := time.Now()
		if _, err := f.WriteString(runLine(agentID, t.ExecID, t.Attempt, t.Epoch, start, time.Time{}, 0)); err != nil {
			return agent.Result{Code: 1, Message: err.Error(), Retryable: true}
		}
		var p faultPayload
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return agent.Result{Code: 2, Message: "bad payload: " + err.Error()}
		}
		code := 0
		if faultFails(t.ExecID, t.Attempt, p.FailPct) {
			code = faultExitRetry
		}
		tm := time.NewTimer(time.Duration(p.HoldMS) * time.Millisecond)
		defer tm.Stop()
		select {
		case <-tm.C:
		case <-ctx.Done():
			code = 1
		}
		if _, err := f.WriteString(runLine(agentID, t.ExecID, t.Attempt, t.Epoch, start, time.Now(), code)); err != nil {
			return agent.Result{Code: 1, Message: err.Error(), Retryable: true}
		}
		if code != 0 {
			return agent.Result{Code: code, Message: "fault test failure", Retryable: true}
		}
		return agent.Result{}
	}
}

// faultScript is the exec handler's command: the same two lines, the agent
// id read from the environment of the agent process that started it, exit
// faultExitRetry for fail_pct percent of the runs (by cksum of "exec/attempt").
// Arguments: run log, fail_pct, hold in seconds.
const faultScript = `#!/bin/sh
start=$(date +%s%N)
agent=$(tr '\0' '\n' < /proc/$PPID/environ 2>/dev/null | sed -n 's/^AX_E2E_AGENT_ID=//p')
[ -n "$agent" ] || agent=unknown
echo "$agent $AX_EXEC_ID $AX_ATTEMPT $AX_EPOCH $start - -" >> "$1"
sleep "$3"
code=0
h=$(printf '%s/%s' "$AX_EXEC_ID" "$AX_ATTEMPT" | cksum | cut -d' ' -f1)
[ $((h % 100)) -lt "$2" ] && code=75
echo "$agent $AX_EXEC_ID $AX_ATTEMPT $AX_EPOCH $start $(date +%s%N) $code" >> "$1"
exit $code
`

// writeFaultScript writes faultScript into dir and returns its path.
func writeFaultScript(tb testing.TB, dir string) string {
	tb.Helper()
	p := filepath.Join(dir, "fault-run.sh")
	if err := os.WriteFile(p, []byte(faultScript), 0o755); err != nil {
		tb.Fatal(err)
	}
	return p
}

// faultHTTPServer is the business system of the http jobs: GET
// /run?pct=N&hold=MS&agent=ID logs the run (exec id and attempt from the
// agent's X-Ax-* headers), holds (it finishes even when the caller went
// away: the side effect happens), and answers 200 or 503 (retryable,
// logged as faultExitRetry).
func faultHTTPServer(tb testing.TB, path string) *httptest.Server {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		tb.Fatalf("open run log: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		execID := r.Header.Get("X-Ax-Exec-Id")
		attempt, _ := strconv.Atoi(r.Header.Get("X-Ax-Attempt"))
		agentID := cmp.Or(r.URL.Query().Get("agent"), "unknown")
		execID = cmp.Or(execID, "none")
		pct, _ := strconv.Atoi(r.URL.Query().Get("pct"))
		hold, _ := strconv.Atoi(r.URL.Query().Get("hold"))
		_, _ = f.WriteString(runLine(agentID, execID, attempt, 0, start, time.Time{}, 0))
		tm := time.NewTimer(time.Duration(hold) * time.Millisecond)
		<-tm.C
		code, status := 0, http.StatusOK
		if faultFails(execID, attempt, pct) {
			code, status = faultExitRetry, http.StatusServiceUnavailable
		}
		_, _ = f.WriteString(runLine(agentID, execID, attempt, 0, start, time.Now(), code))
		w.WriteHeader(status)
	}))
	tb.Cleanup(func() {
		srv.Close()
		_ = f.Close()
	})
	return srv
}

// faultRun is one handler run of the run log.
type faultRun struct {
	agent   string
	execID  string
	attempt int
	epoch   uint64
	start   time.Time
	end     time.Time // zero: no end line (still running, or died with its agent)
	exit    int
}

func (r faultRun) key() string { return fmt.Sprintf("%s/%d", r.execID, r.attempt) }

func (r faultRun) String() string {
	end := "no end"
	if !r.end.IsZero() {
		end = fmt.Sprintf("exit %d after %s", r.exit, r.end.Sub(r.start).Round(time.Millisecond))
	}
	return fmt.Sprintf("%s attempt %d on %s (epoch %d) at %s, %s", r.execID, r.attempt, r.agent, r.epoch,
		r.start.Format("15:04:05.000"), end)
}

// readRuns parses the run log: one faultRun per start line, in the order
// of the file, with its end line's time and exit when there is one. A last
// line still being written (no newline yet) is left out.
func readRuns(path string) ([]faultRun, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read run log: %w", err)
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1]
	var runs []faultRun
	open := map[string]int{} // agent exec attempt start → index in runs
	for n, l := range strings.Split(string(data), "\n") {
		if l == "" {
			continue
		}
		fs := strings.Fields(l)
		if len(fs) != 7 {
			return nil, fmt.Errorf("run log line %d: %q: want 7 fields", n+1, l)
		}
		attempt, err1 := strconv.Atoi(fs[2])
		epoch, err2 := strconv.ParseUint(fs[3], 10, 64)
		start, err3 := strconv.ParseInt(fs[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("run log line %d: %q", n+1, l)
		}
		k := strings.Join(fs[:5], " ")
		if fs[5] == "-" {
			open[k] = len(runs)
			runs = append(runs, faultRun{agent: fs[0], execID: fs[1], attempt: attempt, epoch: epoch, start: time.Unix(0, start)})
			continue
		}
		end, err1 := strconv.ParseInt(fs[5], 10, 64)
		exit, err2 := strconv.Atoi(fs[6])
		i, ok := open[k]
		if err1 != nil || err2 != nil || !ok {
			return nil, fmt.Errorf("run log line %d: %q: bad end line or no start line", n+1, l)
		}
		delete(open, k)
		runs[i].end, runs[i].exit = time.Unix(0, end), exit
	}
	return runs, nil
}
