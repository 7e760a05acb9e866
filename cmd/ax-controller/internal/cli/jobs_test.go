package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// jobFiles lists configs/jobs/*.yaml.
func jobFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../../../configs/jobs/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("configs/jobs: %v %v", files, err)
	}
	return files
}

func applyArgs(url string, files []string, extra ...string) []string {
	args := []string{"job", "apply", "--api", url}
	for _, f := range files {
		args = append(args, "-f", f)
	}
	return append(args, extra...)
}

// TestApplyConfigsTwice applies every sample job file twice: the second run
// finds every job (by idempotency key or name) and changes nothing.
func TestApplyConfigsTwice(t *testing.T) {
	ctx := context.Background()
	url := apiServer(t)
	files := jobFiles(t)

	code, out, errOut := run(ctx, applyArgs(url, files, "-o", "json")...)
	if code != 0 {
		t.Fatalf("first apply: exit %d: %s", code, errOut)
	}
	var first []applyResult
	if err := json.Unmarshal([]byte(out), &first); err != nil {
		t.Fatalf("apply -o json: %v: %s", err, out)
	}
	ids := map[string]string{}
	for _, r := range first {
		if r.Action != "created" || r.Job.ID == "" {
			t.Fatalf("first apply: %+v", r)
		}
		ids[r.Source] = r.Job.ID
	}

	code, out, errOut = run(ctx, applyArgs(url, files, "-o", "json")...)
	if code != 0 {
		t.Fatalf("second apply: exit %d: %s", code, errOut)
	}
	var second []applyResult
	if err := json.Unmarshal([]byte(out), &second); err != nil {
		t.Fatal(err)
	}
	if len(second) != len(first) {
		t.Fatalf("second apply: %d results, first %d", len(second), len(first))
	}
	for _, r := range second {
		if r.Action != "unchanged" || ids[r.Source] != r.Job.ID {
			t.Errorf("second apply %s: %s id %s, want unchanged id %s", r.Source, r.Action, r.Job.ID, ids[r.Source])
		}
	}

	code, out, errOut = run(ctx, "job", "ls", "--api", url, "-o", "json")
	var jobs []protocol.Job
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil || len(jobs) != len(first) {
		t.Fatalf("job ls -o json: exit %d, %d jobs: %s %s", code, len(jobs), out, errOut)
	}

	// A directory applies every file in it: same jobs, unchanged.
	code, out, errOut = run(ctx, "job", "apply", "--api", url, "-f", "../../../../configs/jobs", "-o", "json")
	var third []applyResult
	if code != 0 || json.Unmarshal([]byte(out), &third) != nil || len(third) != len(first) {
		t.Fatalf("apply of the directory: %d %s %s", code, out, errOut)
	}
	for _, r := range third {
		if r.Action != "unchanged" {
			t.Errorf("apply of the directory: %s %s", r.Source, r.Action)
		}
	}

	// The table names every job.
	code, out, _ = run(ctx, "job", "ls", "--api", url)
	if code != 0 || !strings.HasPrefix(out, "ID ") || strings.Count(out, "\n") != len(first)+1 {
		t.Fatalf("job ls table:\n%s", out)
	}
}

// TestApplyUpdatesChangedJob: a changed file updates the matched job in place.
func TestApplyUpdatesChangedJob(t *testing.T) {
	ctx := context.Background()
	url := apiServer(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "job.yaml")
	write := func(prio int) {
		data := "name: refresh\nhandler: http\npayload: {url: \"http://127.0.0.1:9/x\"}\nschedule: {every: 30s}\ntarget: {agent: edge-7}\npriority: " +
			string(rune('0'+prio)) + "\n"
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	if code, _, e := run(ctx, "job", "apply", "--api", url, "-f", path); code != 0 {
		t.Fatal(e)
	}
	// An operator pauses the job; a re-apply of a file without paused keeps it paused.
	_, out, _ := run(ctx, "job", "ls", "--api", url, "-o", "json")
	var jobs []protocol.Job
	if err := json.Unmarshal([]byte(out), &jobs); err != nil || len(jobs) != 1 {
		t.Fatalf("ls: %s", out)
	}
	if code, _, e := run(ctx, "job", "pause", jobs[0].ID, "--api", url); code != 0 {
		t.Fatal(e)
	}
	write(6)
	code, out, e := run(ctx, "job", "apply", "--api", url, "-f", path, "-o", "json")
	var res []applyResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 {
		t.Fatalf("apply: %d %s %s", code, out, e)
	}
	if r := res[0]; r.Action != "updated" || r.Job.ID != jobs[0].ID || r.Job.Priority != 6 || !r.Job.Paused {
		t.Fatalf("apply of changed file: %+v", r)
	}
}

func TestApplyBadFile(t *testing.T) {
	ctx := context.Background()
	url := apiServer(t)
	dir := t.TempDir()
	tests := []struct {
		name, content, want string
	}{
		{"bad cron in a list", "jobs:\n  - name: ok\n    handler: sync\n    schedule: {every: 1m}\n    target: {agent: a1}\n  - name: bad\n    handler: sync\n    schedule: {cron: \"61 * * * *\"}\n    target: {agent: a1}\n", "jobs[1].schedule.cron: "},
		{"unknown field", "name: x\nhandler: exec\nschedule: {every: 1m}\ntarget: {agent: a1}\ntimout: 5s\n", "timout: unknown field"},
		{"unsafe agent", "name: x\nhandler: exec\nschedule: {every: 1m}\ntarget: {agent: \"a 1\"}\n", "target.agent: "},
		{"timeout not a duration", "name: x\nhandler: exec\nschedule: {every: 1m}\ntarget: {agent: a1}\ntimeout: 30\n", "timeout: "},
		{"exec without command", "name: x\nhandler: exec\npayload: {args: [-a]}\nschedule: {every: 1m}\ntarget: {agent: a1}\n", "payload.command: is required"},
		{"misspelt http payload in a list", "jobs:\n  - {name: a, handler: sync, schedule: {every: 1m}, target: {agent: a1}}\n" +
			"  - {name: b, handler: http, payload: {ulr: \"http://h/x\"}, schedule: {every: 1m}, target: {agent: a1}}\n", "jobs[1].payload: "},
		{"duplicate names", "jobs:\n  - {name: x, handler: sync, schedule: {every: 1m}, target: {agent: a1}}\n  - {name: x, handler: sync, schedule: {every: 2m}, target: {agent: a1}}\n", "name: \"x\" is also used"},
		{"not YAML", "name: [unclosed\n", "not valid YAML"},
		{"empty", "", "no jobs found"},
		{"list of scalars", "jobs: [1, 2]\n", "jobs[0]: must be a job"},
		{"extra key next to jobs", "jobs: []\nname: x\n", "name: unknown key next to jobs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			code, _, errOut := run(ctx, "job", "apply", "--api", url, "-f", path)
			if code != ExitError || !strings.HasPrefix(errOut, "error: ") || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit 1 and %q", code, errOut, tc.want)
			}
		})
	}
	// Nothing was created, not even the good job of the first file.
	_, out, _ := run(ctx, "job", "ls", "--api", url, "-o", "json")
	if strings.TrimSpace(out) != "[]" {
		t.Fatalf("bad files created jobs: %s", out)
	}
	// A missing file.
	if code, _, e := run(ctx, "job", "apply", "--api", url, "-f", filepath.Join(dir, "nope.yaml")); code != ExitError || !strings.Contains(e, "nope.yaml") {
		t.Fatalf("missing file: %d %s", code, e)
	}
}

func TestClientCommands(t *testing.T) {
	ctx := context.Background()
	url := apiServer(t)
	files := jobFiles(t)
	if code, _, e := run(ctx, applyArgs(url, files)...); code != 0 {
		t.Fatal(e)
	}
	_, out, _ := run(ctx, "job", "ls", "--api", url, "-o", "json", "--name", "gateway cache refresh")
	var jobs []protocol.Job
	if err := json.Unmarshal([]byte(out), &jobs); err != nil || len(jobs) != 1 {
		t.Fatalf("ls --name: %s", out)
	}
	id := jobs[0].ID

	code, out, e := run(ctx, "job", "get", id, "--api", url)
	if code != 0 || !strings.Contains(out, "name: gateway cache refresh") || !strings.Contains(out, "every: 30s") {
		t.Fatalf("job get (yaml): %d %s %s", code, out, e)
	}
	code, out, e = run(ctx, "job", "trigger", id, "--api", url, "-o", "json")
	var execs []protocol.Execution
	if code != 0 || json.Unmarshal([]byte(out), &execs) != nil || len(execs) != 1 || execs[0].JobID != id {
		t.Fatalf("trigger: %d %s %s", code, out, e)
	}
	ex := execs[0].ExecID
	// A list waits at most 2 s for the history index to hold what the
	// trigger and the cancel stored; a loaded -race run can take longer,
	// so the two lists below poll.
	testutil.EventuallyFunc(t, 30*time.Second, func() string { return fmt.Sprintf("exec ls lists the triggered execution: %d %s", code, out) }, func() bool {
		code, out, _ = run(ctx, "exec", "ls", "--api", url, "--job", id, "-o", "json")
		return code == 0 && json.Unmarshal([]byte(out), &execs) == nil && len(execs) == 1 && execs[0].ExecID == ex
	})
	code, out, _ = run(ctx, "exec", "get", ex, "--api", url, "-o", "json")
	var one protocol.Execution
	if code != 0 || json.Unmarshal([]byte(out), &one) != nil || one.ExecID != ex {
		t.Fatalf("exec get: %d %s", code, out)
	}
	code, out, _ = run(ctx, "exec", "cancel", ex, "--api", url)
	if code != 0 || !strings.Contains(out, "CANCELLED") {
		t.Fatalf("exec cancel: %d %s", code, out)
	}
	code, _, e = run(ctx, "exec", "retry", ex, "--api", url)
	if code != ExitError || !strings.HasPrefix(e, "error: ") {
		t.Fatalf("retry of cancelled: %d %s", code, e)
	}
	testutil.EventuallyFunc(t, 30*time.Second, func() string { return fmt.Sprintf("exec ls --state lists the cancelled execution: %d %s", code, out) }, func() bool {
		code, out, _ = run(ctx, "exec", "ls", "--api", url, "--state", "cancelled")
		return code == 0 && strings.Contains(out, ex)
	})
	code, out, _ = run(ctx, "agent", "ls", "--api", url, "-o", "json")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("agent ls: %d %s", code, out)
	}
	code, out, _ = run(ctx, "job", "pause", id, "--api", url)
	if code != 0 || !strings.Contains(out, "true") {
		t.Fatalf("pause: %s", out)
	}
	code, _, _ = run(ctx, "job", "resume", id, "--api", url)
	if code != 0 {
		t.Fatal("resume")
	}
	code, out, _ = run(ctx, "job", "rm", id, "--api", url)
	if code != 0 || !strings.Contains(out, "deleted "+id) {
		t.Fatalf("rm: %s", out)
	}
	// Errors name the field and exit non-zero.
	code, _, e = run(ctx, "job", "get", "not-an-id", "--api", url)
	if code != ExitError || !strings.HasPrefix(e, "error: id: ") {
		t.Fatalf("get bad id: %d %q", code, e)
	}
	code, _, e = run(ctx, "job", "get", id, "--api", url)
	if code != ExitError || !strings.Contains(e, "not found") {
		t.Fatalf("get deleted: %d %q", code, e)
	}
	code, _, e = run(ctx, "exec", "ls", "--api", url, "--state", "DONE")
	if code != ExitUsage || !strings.Contains(e, "--state") {
		t.Fatalf("bad state: %d %q", code, e)
	}
}

func TestClientAuthFromEnv(t *testing.T) {
	ctx := context.Background()
	url := apiServer(t, tokenAdmin())
	code, _, e := run(ctx, "job", "ls", "--api", url)
	if code != ExitError || !strings.Contains(e, "bearer token") {
		t.Fatalf("no token: %d %q", code, e)
	}
	t.Setenv("AX_API_URL", url)
	t.Setenv("AX_API_TOKEN", tokenAdmin().Token)
	if code, _, e := run(ctx, "job", "ls"); code != 0 {
		t.Fatalf("token from env: %d %s", code, e)
	}
	// The flag wins over the env.
	if code, _, e := run(ctx, "job", "ls", "--token", "wrong-token-0123456789"); code != ExitError || !strings.Contains(e, "not valid") {
		t.Fatalf("flag over env: %d %s", code, e)
	}
}

func TestUsageErrors(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{"job", "get"},
		{"job", "ls", "--bogus"},
		{"job", "ls", "-o", "xml"},
		{"job", "apply"},
		{"exec", "get", "a", "b"},
		{"nonsense"},
	} {
		code, _, e := run(ctx, args...)
		if code == 0 || !strings.HasPrefix(e, "error: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, e)
		}
	}
	if code, _, _ := run(ctx, "job", "ls", "--bogus"); code != ExitUsage {
		t.Errorf("unknown flag: exit %d, want %d", code, ExitUsage)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run(context.Background(), "version")
	if code != 0 || out != "ax-controller 1.2.3 (commit abc123, built 2026-11-29)\n" {
		t.Fatalf("%d %q", code, out)
	}
	code, out, _ = run(context.Background(), "version", "-o", "json")
	var v map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v["commit"] != "abc123" {
		t.Fatalf("%d %q", code, out)
	}
}
