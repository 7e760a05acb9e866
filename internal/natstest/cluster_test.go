package natstest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/testutil"
)

// TestClusterSurvivesNodeLoss starts a 3-node cluster, checks it is one
// JetStream cluster (a meta leader seeing 3 peers, an R3 stream placed on
// all three nodes), stops the node leading that stream, and checks the
// stream keeps accepting writes through the two others; the node then
// restarts on the same ports and store, rejoins and catches up.
func TestClusterSurvivesNodeLoss(t *testing.T) {
	start := time.Now()
	cl := StartCluster(t, 3)
	t.Logf("%s formed in %s", cl, time.Since(start).Round(time.Millisecond))
	if cl.Leader() < 0 {
		t.Fatal("no meta leader after StartCluster")
	}
	if got := len(strings.Split(cl.ClientURLs(), ",")); got != 3 {
		t.Fatalf("ClientURLs %q has %d URLs, want 3", cl.ClientURLs(), got)
	}
	nc, err := nats.Connect(cl.ClientURLs(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := testutil.Context(t, 60*time.Second)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
		t.Fatalf("stream T is not replicated on 3 nodes: %+v", info.Cluster)
	}
	publish := func(i int) {
		t.Helper()
		var lastErr error
		testutil.EventuallyFunc(t, 20*time.Second, func() string { return fmt.Sprintf("message %d stored: %v", i, lastErr) }, func() bool {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, lastErr = js.Publish(pctx, "t.x", []byte("m"), jetstream.WithMsgID(fmt.Sprint(i)))
			return lastErr == nil
		})
	}
	for i := range 10 {
		publish(i)
	}

	victim := -1
	for i := range cl.N() {
		if cl.Server(i).JetStreamIsStreamLeader("$G", "T") {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatal("no node leads stream T")
	}
	stopped := time.Now()
	cl.Stop(victim)
	for i := 10; i < 20; i++ {
		publish(i)
	}
	t.Logf("stopped stream leader %s; 10 more writes stored in %s", cl.Name(victim), time.Since(stopped).Round(time.Millisecond))
	if info, err = st.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 20 {
		t.Fatalf("stream has %d messages after the node loss, want 20", info.State.Msgs)
	}
	if info.Cluster == nil || info.Cluster.Leader == cl.Name(victim) || info.Cluster.Leader == "" {
		t.Fatalf("stream leader after stopping %s: %+v", cl.Name(victim), info.Cluster)
	}

	cl.Restart(victim)
	testutil.Eventually(t, 20*time.Second, cl.Name(victim)+" current with stream T", func() bool {
		s := cl.Server(victim)
		return s != nil && s.JetStreamIsStreamCurrent("$G", "T")
	})
	publish(20)
	if info, err = st.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 21 {
		t.Fatalf("stream has %d messages after the restart, want 21", info.State.Msgs)
	}
}
