package scheduler

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// FuzzApplyCommand feeds arbitrary bytes through the command path end to
// end (decode, validate, apply to a real SQLite store): nothing panics, every
// command is answered, and the cursor always advances past it.
func FuzzApplyCommand(f *testing.F) {
	j := protocoltest.NewJob("edge-f", "noop", schedule.Spec{Every: "1s"}, map[string]any{"k": 1})
	for _, cmd := range []protocol.Command{
		protocoltest.AssignCmd(j),
		protocoltest.RunCmd(j, 2, time.Unix(1800000000, 0)),
		{Kind: protocol.CmdUnassign, Unassign: &protocol.Unassign{JobID: j.ID}},
		{Kind: protocol.CmdCancel, Cancel: &protocol.Cancel{ExecID: protocol.ExecID(j.ID, time.Unix(1800000000, 0))}},
		{Kind: protocol.CmdLeaseGrant, Lease: &protocol.Lease{JobID: j.ID, Epoch: 3, TTL: protocol.Duration(time.Second)}},
		{Kind: protocol.CmdLeaseRevoke, Lease: &protocol.Lease{JobID: j.ID, Epoch: 3}},
	} {
		cmd.V, cmd.Agent, cmd.IssuedAt = protocol.Version, "edge-f", time.Unix(1800000000, 0).UTC()
		b, err := protocol.Encode(cmd)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"v":2,"kind":"assign","agent":"edge-f","assign":{"job":{"id":"x"}}}`))
	f.Add([]byte(`{"v":2,"kind":"run","agent":"other","run":{}}`))
	f.Add([]byte(`not json`))
	f.Add([]byte{})

	o := newOffline(f, offlineConfig(f, "edge-f"), time.Now())
	var seq uint64
	f.Fuzz(func(t *testing.T, data []byte) {
		seq++
		done := make(chan error, 1)
		o.s.Apply(seq, data, func(err error) { done <- err })
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("command path wedged")
		}
		// Drop the scheduler's queued follow-ups: this test has no scheduler goroutine.
		o.s.env.mail.drop()
		v, _, err := o.st.Meta(context.Background(), store.MetaCursor)
		if err != nil || v != strconv.FormatUint(seq, 10) {
			t.Fatalf("cursor = %q (%v), want %d", v, err, seq)
		}
	})
}
