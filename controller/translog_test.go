package controller

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// logMessages returns the msg of every JSON line in logs that names exec.
func logMessages(t *testing.T, logs *testutil.Buffer, exec string) []string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["exec"] == exec {
			out = append(out, rec["msg"].(string))
		}
	}
	return out
}

// waitLogRecord waits up to d for a JSON line in logs whose msg is msg and
// that match accepts (nil: any), and returns it decoded.
func waitLogRecord(tb testing.TB, d time.Duration, logs *testutil.Buffer, msg string, match func(map[string]any) bool) map[string]any {
	tb.Helper()
	var found map[string]any
	eventually(tb, d, "log record "+msg, func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg && (match == nil || match(rec)) {
				found = rec
				return true
			}
		}
		return false
	})
	return found
}

// TestOneLogLinePerExecutionAtInfo: at info the controller logs one line
// for an execution that ran to SUCCESS ("execution finished"); at debug
// the trail of its steps as well.
func TestOneLogLinePerExecutionAtInfo(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  []string
	}{
		{slog.LevelInfo, []string{"execution finished"}},
		{slog.LevelDebug, []string{"execution triggered", "execution running", "execution finished"}},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			logs := &testutil.Buffer{}
			cfg := testConfig(t, t.TempDir())
			cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: tc.level}))
			c := startController(t, cfg)
			ag := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
			job, err := c.CreateJob(tctx(t), everyJob("edge-1", "1s"))
			if err != nil {
				t.Fatal(err)
			}
			ag.waitCommand("assign", isAssign(job.ID, 1))
			s, err := schedule.Parse(job.Schedule, job.CreatedAt)
			if err != nil {
				t.Fatal(err)
			}
			at, _ := s.Next(job.CreatedAt)
			id := protocol.ExecID(job.ID, at)
			ag.runAttempt(job.ID, id, 1, at, retry.OutcomeSuccess, ok)
			waitExec(t, c, id, "SUCCESS", inState(protocol.StateSuccess))
			eventually(t, 10*time.Second, "the finished line", func() bool {
				m := logMessages(t, logs, id)
				return len(m) > 0 && m[len(m)-1] == "execution finished"
			})
			if got := logMessages(t, logs, id); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("lines for %s at %v = %q, want %q", id, tc.level, got, tc.want)
			}
		})
	}
}
