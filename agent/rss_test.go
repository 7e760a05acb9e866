package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// rssOf reads the resident-memory fields of pid (testutil.ProcRSS).
func rssOf(t *testing.T, pid int) map[string]int {
	got, err := testutil.ProcRSS(pid)
	must(t, err)
	return got
}

// logRSS logs VmRSS of pid with its parts.
func logRSS(t *testing.T, pid int, what string) {
	r := rssOf(t, pid)
	t.Logf("%s VmRSS: %d KiB (%.1f MiB); RssAnon %d KiB, RssFile %d KiB", what, r["VmRSS"], float64(r["VmRSS"])/1024,
		r["RssAnon"], r["RssFile"])
}

// logWorkingSet logs the pages pid touches in a quiet window
// (AX_RSS_WINDOW, default 30s): its idle working set, beside RSS, which also
// counts every file page touched since the start (package initialisation,
// opening the store) and those the kernel's fault-around mapped beside
// them, kept until memory is short. The window is the measurement itself, not
// a wait for a condition.
func logWorkingSet(t *testing.T, pid int) {
	window := 30 * time.Second
	if v := os.Getenv("AX_RSS_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		must(t, err)
		window = d
	}
	if err := testutil.ClearRefs(pid); err != nil {
		t.Logf("no working set: %v", err)
		return
	}
	<-time.After(window)
	ref, err := testutil.ProcReferenced(pid)
	must(t, err)
	t.Logf("idle working set over %s: %d KiB (%.1f MiB); anonymous %d KiB, file %d KiB", window,
		ref["anon"]+ref["file"], float64(ref["anon"]+ref["file"])/1024, ref["anon"], ref["file"])
}

// TestRSSBudget measures the real binary's resident memory idle (before and
// after release_pages_after gives back its start-up pages) and with
// 100k pending one-shot executions. It builds cmd/ax-agent, so it runs only
// with AX_RSS=1 (see BENCHMARKS.md).
func TestRSSBudget(t *testing.T) {
	if os.Getenv("AX_RSS") == "" {
		t.Skip("set AX_RSS=1 to measure RSS of the built binary")
	}
	c := startCtl(t)
	// Idle as a deployed agent is: heartbeats at the default interval, not
	// the double's 100 ms, whose traffic grows the heap between collections.
	c.hbEvery.Store(int64(DefaultHeartbeat))
	bin := filepath.Join(t.TempDir(), "ax-agent")
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "../cmd/ax-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// On disk, as an installed binary is: the page cache keeps a page not
	// written yet, which the release would leave mapped.
	if f, err := os.Open(bin); err == nil {
		must(t, f.Sync())
		_ = f.Close()
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "agent.yaml")
	must(t, os.WriteFile(cfgFile, []byte("id: edge-r\ndata_dir: "+dir+"\nnats:\n  url: "+c.srv.URL()+
		"\nworkers: 4\nrelease_pages_after: 20s\nlog:\n  level: warn\n"), 0o600))
	cmd := exec.Command(bin, "run", "-c", cfgFile)
	cmd.Stderr = os.Stderr
	if g := os.Getenv("AX_RSS_GOGC"); g != "" {
		cmd.Env = append(os.Environ(), "GOGC="+g)
	}
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitFor(t, 20*time.Second, "registration", func() bool { n, _ := c.heartbeats(); return n >= 2 })
	pid := cmd.Process.Pid
	logRSS(t, pid, "idle, before the binary's pages are released,")
	before := rssOf(t, pid)["RssFile"]
	// release_pages_after (20s): the file pages drop below half, then the
	// idle loop faults back what it uses.
	waitFor(t, 60*time.Second, "the binary's pages released", func() bool { return rssOf(t, pid)["RssFile"]*2 < before })
	logWorkingSet(t, pid)
	logRSS(t, pid, "idle, after the release and the working-set window,")

	const n = 100000
	j := newJob("edge-r", "noop", schedule.Spec{Asap: true}, map[string]any{"data": strings.Repeat("x", 64)})
	at := time.Now().Add(time.Hour)
	ctx := context.Background()
	for i := range n {
		cmd := runCmd(j, 1, at.Add(time.Duration(i)*time.Millisecond))
		cmd.V, cmd.Agent, cmd.IssuedAt = protocol.Version, "edge-r", time.Now().UTC()
		b, err := protocol.Encode(cmd)
		must(t, err)
		if _, err := c.js.PublishAsync(protocol.CommandSubject("edge-r"), b); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-c.js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		t.Fatal("publishing commands timed out")
	}
	_ = ctx
	waitFor(t, 300*time.Second, "100k pending", func() bool { _, hb := c.heartbeats(); return hb.Stats.Pending >= n })
	logRSS(t, cmd.Process.Pid, "with "+strconv.Itoa(n)+" pending,")
}
