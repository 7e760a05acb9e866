package streams

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/pkg/protocol"
)

func TestEnsureIsIdempotent(t *testing.T) {
	s := natstest.Start(t)
	nc, err := nats.Connect(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	b, err := Ensure(ctx, js, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Jobs.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, protocol.CommandSubject("edge-7"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// Again: nothing is lost or reset.
	b, err = Ensure(ctx, js, Config{})
	if err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	if e, err := b.Jobs.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("bucket lost its data: %v", err)
	}
	st, _ := js.Stream(ctx, protocol.StreamCommands)
	info, _ := st.Info(ctx)
	if info.State.Msgs != 1 {
		t.Fatalf("AX_CMD has %d msgs after second Ensure", info.State.Msgs)
	}
	rpt, _ := js.Stream(ctx, protocol.StreamReports)
	rinfo, _ := rpt.Info(ctx)
	if rinfo.Config.Retention != jetstream.WorkQueuePolicy {
		t.Fatalf("AX_RPT retention %v, want work queue", rinfo.Config.Retention)
	}
	ls, _ := b.Leases.Status(ctx)
	if ls.TTL() != DefaultLeaseTTL || ls.History() != 1 {
		t.Fatalf("ax_leases TTL %v history %d", ls.TTL(), ls.History())
	}
	// Report de-duplication by Nats-Msg-Id.
	for i := 0; i < 2; i++ {
		if _, err := js.Publish(ctx, protocol.ReportSubject(0, "edge-7"), []byte("{}"), jetstream.WithMsgID("e/1/triggered")); err != nil {
			t.Fatal(err)
		}
	}
	rinfo, _ = rpt.Info(ctx)
	if rinfo.State.Msgs != 1 {
		t.Fatalf("duplicate report stored: %d msgs", rinfo.State.Msgs)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{Replicas: 7}, {Replicas: -1}, {LeaseTTL: -time.Second}} {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig", c, err)
		}
	}
}
