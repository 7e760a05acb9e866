package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/controller/driver"
	"github.com/axsched/ax/internal/faultproxy"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/pkg/protocol"
)

// TestFrozenOwnerHoldsOneChange: two replicas on one server; ctl-b reaches
// it through a proxy that is then frozen (its connection stays open,
// nothing goes through: what the server sees of a replica stopped with
// SIGSTOP). A pause of a job of ctl-b's shards made through ctl-a asks
// ctl-b once, gets no answer within the driver's timeout and is sent by
// ctl-a; the resume after it is sent by ctl-a without asking ctl-b again.
// Every subject the server routes is watched in order: ctl-a's requests
// and commands leave on one connection, so a request of the resume would
// be seen between its job write and its assign. After the thaw ctl-b
// takes the late request.
func TestFrozenOwnerHoldsOneChange(t *testing.T) {
	srv := natstest.Start(t)
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	// Leases far longer than the test: ctl-a must not take ctl-b's shards
	// while it is frozen, or the changes would be ctl-a's own.
	a := startController(t, replicaConfig(t, srv.URL(), "ctl-a", 30*time.Second))
	b := startController(t, replicaConfig(t, p.URL(), "ctl-b", 30*time.Second))
	t.Cleanup(p.Thaw) // before the controllers stop: ctl-b's shutdown talks to the server
	waitSplit(t, a, b)
	ag := newTestAgent(t, srv.URL(), "edge-1", nil).start()
	ctx := tctx(t)

	j := createOnShardOf(t, ctx, a, b, everyJob("edge-1", "1h"))
	ag.waitCommand("assign from ctl-b", isAssign(j.ID, 1))

	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	seen := make(chan *nats.Msg, 1<<16)
	sub, err := nc.ChanSubscribe(">", seen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	p.Freeze()
	fallback := jobChanges(a, driver.RouteFallback)
	if _, err := a.PauseJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if n := jobChanges(a, driver.RouteFallback); n != fallback+1 {
		t.Fatalf("pause with ctl-b frozen: ctl-a fell back %d times, want %d", n, fallback+1)
	}
	ag.waitCommand("assign of the pause, from ctl-a", func(c protocol.Command) bool {
		return isAssign(j.ID, 2)(c) && c.Assign.Job.Paused
	})
	if _, err := a.ResumeJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if n := jobChanges(a, driver.RouteFallback); n != fallback+2 {
		t.Fatalf("resume with ctl-b frozen: ctl-a fell back %d times, want %d", n, fallback+2)
	}
	ag.waitCommand("assign of the resume, from ctl-a", isAssign(j.ID, 3))

	// The order on the server: write (pause), request, assign (gen 2),
	// write (resume), assign (gen 3), with no request after the first.
	ask := driver.Subject(b.instance)
	jobKey := "$KV." + protocol.BucketJobs + "." + j.ID
	cmd := protocol.CommandSubject("edge-1")
	writes, asks, assignsAfterResume := 0, 0, 0
	deadline := time.After(20 * time.Second)
	for assignsAfterResume == 0 {
		select {
		case m := <-seen:
			if strings.HasPrefix(m.Reply, "$JS.ACK.") {
				continue // a consumer's delivery (it keeps the stored subject), not a publish
			}
			switch {
			case m.Subject == jobKey:
				writes++
			case m.Subject == ask:
				asks++
				if writes != 1 {
					t.Fatalf("ctl-b asked after job write %d; want it asked once, for the pause", writes)
				}
			case m.Subject == cmd && writes == 2 && strings.Contains(string(m.Data), j.ID):
				assignsAfterResume++
			}
		case <-deadline:
			t.Fatalf("the resume's assign not seen (job writes %d, requests to ctl-b %d)", writes, asks)
		}
	}
	if asks != 1 {
		t.Fatalf("ctl-b asked %d times, want once", asks)
	}

	// Thawed, ctl-b takes the late request and sends it (toward the
	// newest version it knows; the agents order commands by generation).
	p.Thaw()
	eventually(t, 20*time.Second, "ctl-b serves the late request", func() bool {
		return jobChanges(b, driver.RouteServed) >= 2 // the create, then the pause
	})
}
