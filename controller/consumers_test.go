package controller

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// AX_CMD sets its consumer limit: without one nats-server's default of
// 1,000 consumers per stream refuses the 1,001st agent's consumer.
func TestCommandStreamConsumerLimitIsSet(t *testing.T) {
	c := newTestController(t)
	s, err := c.js.Stream(tctx(t), protocol.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.MaxConsumers; got != streams.DefaultCommandMaxConsumers {
		t.Fatalf("AX_CMD max_consumers = %d, want %d", got, streams.DefaultCommandMaxConsumers)
	}
}

// An agent whose command consumer the server refused (the stream's limit,
// lowered here to 1) is online but gets no commands: the controller lists
// it as without a command consumer and counts it in the metric, instead of
// showing it as an ordinary online agent.
func TestAgentWithoutCommandConsumerIsNotReady(t *testing.T) {
	c := newTestController(t)
	ctx := tctx(t)
	s, err := c.js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	sc.MaxConsumers = 1
	if _, err := c.js.UpdateStream(ctx, sc); err != nil {
		t.Fatalf("lower AX_CMD max_consumers: %v", err)
	}
	a := newTestAgent(t, c.NATSURL(), "edge-a", nil).start()
	b := newTestAgent(t, c.NATSURL(), "edge-b", nil)
	_, err = b.js.OrderedConsumer(ctx, protocol.StreamCommands, jetstream.OrderedConsumerConfig{
		NamePrefix:     protocol.CommandConsumerPrefix(b.id) + nuid.Next(),
		FilterSubjects: []string{protocol.CommandSubject(b.id)},
	})
	if !errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
		t.Fatalf("second consumer: err = %v, want the consumer limit (10026)", err)
	}
	b.register()
	a.heartbeat()
	b.heartbeat()
	for range 2 {
		if err := c.checkConsumers(ctx); err != nil {
			t.Fatal(err)
		}
	}
	agents, err := c.ListAgents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, ag := range agents {
		if !ag.Online {
			t.Fatalf("agent %s offline", ag.Agent)
		}
		got[ag.Agent] = ag.NoCommandConsumer
	}
	if got["edge-a"] || !got["edge-b"] {
		t.Fatalf("no_command_consumer = %v, want edge-b only", got)
	}
	if v := testutil.MetricValue(t, c.m.agentsNoCmd); v != 1 {
		t.Fatalf("%s = %v, want 1", metricAgentsNoCmd, v)
	}
}
