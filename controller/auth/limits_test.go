package auth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// TestAgentAccountLimits: an agent's key holds at most
// AgentMaxConnections connections and sends messages of at most
// AgentMaxPayload; another agent is not affected by the first reaching
// its limits.
func TestAgentAccountLimits(t *testing.T) {
	e := newEnv(t, "a", "b")
	for range auth.AgentMaxConnections {
		e.mustConnect("a")
	}
	if _, err := e.connect("a", nats.MaxReconnects(0)); err == nil {
		t.Fatalf("connection %d of agent a accepted", auth.AgentMaxConnections+1)
	}
	b := e.mustConnect("b")
	if err := b.nc.Publish(protocol.ReportSubject(0, "b"), make([]byte, protocol.MaxMessageSize)); err != nil {
		t.Fatalf("a report of protocol.MaxMessageSize: %v", err)
	}
	if err := b.nc.Flush(); err != nil {
		t.Fatalf("flush after a report of protocol.MaxMessageSize: %v", err)
	}
	err := b.nc.Publish(protocol.ReportSubject(0, "b"), make([]byte, auth.AgentMaxPayload+1))
	if err == nil {
		err = b.nc.Flush()
	}
	testutil.Eventually(t, 10*time.Second, "the oversize message refused", func() bool {
		return errors.Is(err, nats.ErrMaxPayload) || b.nc.IsClosed() || b.nc.LastError() != nil
	})
}
