package agent

import (
	"time"

	"github.com/axsched/ax/agent/scheduler"
	"github.com/axsched/ax/pkg/protocol"
)

// host is the agent as the scheduler sees it (scheduler.Host): the clock
// offset the link measures, report encoding (shards, salted Msg-Ids),
// and the outbox and heartbeat kicks.
type host struct{ a *Agent }

func (h host) ClockOffset() time.Duration { return time.Duration(h.a.offset.Load()) }

func (h host) EncodeReport(r protocol.Report) (scheduler.Report, error) { return h.a.encodeReport(r) }

func (h host) KickOutbox() { h.a.kickOutbox() }

func (h host) KickHeartbeat() {
	select {
	case h.a.hbKick <- struct{}{}:
	default:
	}
}

// schedConfig is the scheduler's part of the agent's config.
func (a *Agent) schedConfig() scheduler.Config {
	c := a.cfg
	return scheduler.Config{AgentID: c.ID, Store: a.st, Clock: a.clk, Handlers: a.handlers, Log: a.log,
		Workers: c.Workers, QueueSize: c.Queue.Size, AgingStep: c.Queue.AgingStep, SlowStartFraction: DefaultSlowStartFraction,
		Grace: c.Shutdown.Grace, Retention: c.Store.Retention, PruneInterval: c.Store.PruneInterval,
		JumpThreshold: c.Clock.JumpThreshold, MaxSkew: c.Clock.MaxSkew, AdoptSkew: c.Clock.OnSkew == SkewAdopt,
		CoalesceSkipped: c.Outbox.CoalesceSkipped, SkippedWindow: c.Outbox.SkippedWindow}
}
