package controller

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestCreateOneShotReadsNothing: POST /v1/jobs of a one-shot job creates
// its execution without reading it first, neither from ax_execs (a KV get,
// one round trip before the create) nor from the history index (a SQLite
// query): a job created in the same call cannot have either. The history
// index's reader is closed, so any read of it fails the create. The
// reports of the run then apply to the record CreateJob wrote, without
// reading it from ax_execs either.
func TestCreateOneShotReadsNothing(t *testing.T) {
	c := newTestController(t)
	er := recordEvents(t, c.NATSURL())
	a := newTestAgent(t, c.NATSURL(), "edge-1", nil).start()
	a.register()
	ctx := tctx(t)

	nc, err := nats.Connect(c.NATSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// A channel subscription: the reader puts a message in the channel
	// before it handles the PONG of a later Flush, so after Flush the
	// channel holds every read made before.
	gets := make(chan *nats.Msg, 64)
	for _, subj := range []string{"$JS.API.DIRECT.GET.KV_" + protocol.BucketExecs + ".>", "$JS.API.DIRECT.GET.KV_" + protocol.BucketExecs,
		"$JS.API.STREAM.MSG.GET.KV_" + protocol.BucketExecs} {
		if _, err := nc.ChanSubscribe(subj, gets); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := c.hist.idx.CloseReads(); err != nil {
		t.Fatal(err)
	}

	j, err := c.CreateJob(ctx, asapJob("edge-1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := len(gets); n != 0 {
		t.Errorf("CreateJob read ax_execs %d times, want 0", n)
	}
	execID := protocol.ExecID(j.ID, j.CreatedAt)
	v, err := c.ex.readExec(ctx, execID)
	if err != nil || v.Rec == nil || v.Rec.State != protocol.StatePending || v.Rec.Agent != "edge-1" {
		t.Fatalf("execution %s after CreateJob: %+v, %v; want PENDING on edge-1", execID, v.Rec, err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(gets) == 0 { // the read just made is seen: the count above means something
		t.Fatal("a read of ax_execs was not counted")
	}
	a.waitCommand("run of "+execID, isRun(execID, 1))

	for len(gets) > 0 {
		<-gets
	}
	a.runAttempt(j.ID, execID, 1, j.CreatedAt, retry.OutcomeSuccess, retry.Result{})
	eventually(t, 10*time.Second, "the SUCCESS event", func() bool {
		p := er.Path(execID)
		return len(p) > 0 && p[len(p)-1] == protocol.StateSuccess
	})
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if n := len(gets); n != 0 {
		t.Errorf("the reports of %s read ax_execs %d times, want 0", execID, n)
	}
}
