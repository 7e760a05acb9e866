package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

func TestExecWatch(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	_, js := natstest.JetStream(t, srv.URL())
	if _, err := streams.Ensure(ctx, js, streams.Config{Memory: true}); err != nil {
		t.Fatal(err)
	}
	jobA, jobB := "ax-t1-20261129120000-aaaaaa", "ax-t1-20261129120000-bbbbbb"
	at := time.Now().UTC().Truncate(time.Millisecond)
	publish := func(job string, from, to protocol.State, attempt int, via ...protocol.State) {
		ev := protocol.Event{V: protocol.Version, JobID: job, ExecID: protocol.ExecID(job, at), Attempt: attempt, From: from, Via: via, To: to, At: at, Agent: "edge-7", Reason: "test"}
		data, err := protocol.Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.Publish(ctx, protocol.EventSubject(to, job), data); err != nil {
			t.Fatal(err)
		}
	}
	publish(jobA, protocol.StatePending, protocol.StateRunning, 1)
	publish(jobB, protocol.StatePending, protocol.StateRunning, 1)
	// A bad message on the stream is shown as skipped, not fatal.
	if _, err := js.Publish(ctx, protocol.EventSubject(protocol.StateFailed, jobA), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	// A job's retirement on the stream is no execution's event: outside the
	// watch's filters, not shown, not reported as bad.
	if _, err := js.Publish(ctx, protocol.JobRetiredSubject(jobB), []byte(`{"v":2,"job":{"id":"`+jobB+`"}}`)); err != nil {
		t.Fatal(err)
	}
	publish(jobA, protocol.StateRunning, protocol.StateRetryWaiting, 1)
	// One change through TRIGGERED and RUNNING to SUCCESS (an agent's
	// coalesced report): one event on SUCCESS's subject.
	publish(jobB, protocol.StatePending, protocol.StateSuccess, 1, protocol.StateTriggered, protocol.StateRunning)

	// Job filter, JSON lines: only job A's two events.
	code, out, e := run(ctx, "exec", "watch", "--nats-url", srv.URL(), "--job", jobA, "--since", "1h", "--count", "2", "-o", "json")
	if code != 0 {
		t.Fatalf("watch: %d %s", code, e)
	}
	var evs []protocol.Event
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		var ev protocol.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	if len(evs) != 2 || evs[0].JobID != jobA || evs[1].To != protocol.StateRetryWaiting {
		t.Fatalf("events: %+v\n%s", evs, out)
	}
	if strings.Count(out, "# skipped a bad event") != 1 {
		t.Errorf("want the one bad event reported:\n%s", out)
	}

	// State filter, table: one row per event, the change that passed
	// through RUNNING included, its VIA shown.
	code, out, e = run(ctx, "exec", "watch", "--nats-url", srv.URL(), "--state", "running", "--since", "1h", "--count", "3")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[0], "TIME") || !strings.Contains(lines[0], "VIA") ||
		!strings.Contains(lines[1], "RUNNING") || !strings.Contains(lines[2], jobB) || !strings.HasPrefix(lines[3], "# skipped") ||
		!strings.Contains(lines[4], "SUCCESS") || !strings.Contains(lines[4], "TRIGGERED,RUNNING") {
		t.Fatalf("watch table: %d %s\n%s", code, e, out)
	}
	// Any other state's filter is its subject: the RETRY_WAITING event only.
	code, out, e = run(ctx, "exec", "watch", "--nats-url", srv.URL(), "--state", "retry_waiting", "--since", "1h", "--count", "1", "-o", "json")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"to":"RETRY_WAITING"`) {
		t.Fatalf("watch --state retry_waiting: %d %s\n%s", code, e, out)
	}

	// Live: a watch of new events only sees an event published after it started.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	type result struct {
		code int
		out  string
	}
	res := make(chan result, 1)
	var outb, errb syncBuf
	go func() {
		c := Main(wctx, []string{"exec", "watch", "--nats-url", srv.URL(), "--job", jobB, "--count", "1", "-o", "json"}, IO{Out: &outb, Err: &errb}, Build{})
		res <- result{c, outb.String()}
	}()
	// Publish until the watcher has its consumer and prints the event.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case r := <-res:
			var ev protocol.Event
			if r.code != 0 || json.Unmarshal([]byte(strings.TrimSpace(strings.Split(r.out, "\n")[0])), &ev) != nil || ev.To != protocol.StateSuccess {
				t.Fatalf("live watch: %d %q %s", r.code, r.out, errb.String())
			}
			return
		case <-tick.C:
			publish(jobB, protocol.StateRunning, protocol.StateSuccess, 1)
		case <-wctx.Done():
			t.Fatal("live watch saw nothing")
		}
	}
}

func TestWatchBadNATS(t *testing.T) {
	code, _, e := run(context.Background(), "exec", "watch", "--nats-url", "nats://127.0.0.1:1")
	if code != ExitError || !strings.Contains(e, "nats.url") {
		t.Fatalf("%d %s", code, e)
	}
}
