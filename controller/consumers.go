package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// consumerCheckInterval is how often the controller lists AX_CMD's
// consumers to find online agents without one.
const consumerCheckInterval = 10 * time.Second

// consumerCheck remembers, per online agent, how many consecutive listings
// of AX_CMD's consumers had none of the agent's ("<agent>~…"). An agent
// whose consumer creation was refused (the stream's consumer limit, error
// 10026) is online but receives no commands: two misses in a row (one may
// be an agent that registered and not yet created its consumer, or nats.go
// rebuilding it) mark it not ready.
type consumerCheck struct {
	mu      sync.Mutex
	missing map[string]int
}

// notReady reports whether agent id is marked without a command consumer.
func (cc *consumerCheck) notReady(id string) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.missing[id] >= 2
}

// count returns how many agents are marked without a command consumer.
func (cc *consumerCheck) count() int {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	n := 0
	for _, v := range cc.missing {
		if v >= 2 {
			n++
		}
	}
	return n
}

// checkConsumers lists AX_CMD's consumers and updates the marks of the
// online agents and ax_agents_without_command_consumer.
func (c *core) checkConsumers(ctx context.Context) error {
	s, err := c.js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		return fmt.Errorf("check command consumers: %w", err)
	}
	have := map[string]bool{}
	names := s.ConsumerNames(ctx)
	for n := range names.Name() {
		if i := strings.IndexByte(n, '~'); i > 0 {
			have[n[:i]] = true
		}
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("check command consumers: list: %w", err)
	}
	online := c.agents.OnlineIDs(c.now(), c.cfg.AgentOfflineAfter)
	cc := &c.consumers
	cc.mu.Lock()
	next := make(map[string]int)
	var without []string
	for _, id := range online {
		if have[id] {
			continue
		}
		next[id] = cc.missing[id] + 1
		if next[id] == 2 {
			without = append(without, id)
		}
	}
	cc.missing = next
	n := 0
	for _, v := range next {
		if v >= 2 {
			n++
		}
	}
	cc.mu.Unlock()
	c.m.agentsNoCmd.Set(float64(n))
	if len(without) > 0 {
		slices.Sort(without)
		c.log.Error("agents online without a command consumer: they receive no commands (AX_CMD's consumer limit reached?)",
			"count", len(without), "agents", without[:min(len(without), 10)])
	}
	return nil
}

// consumerLoop runs checkConsumers every consumerCheckInterval.
func (c *core) consumerLoop(ctx context.Context) {
	c.every(ctx, consumerCheckInterval, consumerCheckInterval, "command consumer check failed", c.checkConsumers)
}
