package controller

import (
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// The registration and heartbeat responders subscribe on a NATS connection
// of their own (same server, same identity), not on the controller's main
// connection. On the main one, each heartbeat request and reply queued
// behind everything else the controller sends and receives: the liveness
// writes to ax_agents and their acknowledgements, the ax_agents watch
// echoing every write back, reports, commands, JetStream API requests. At
// 10,000 agents that is over a thousand KV writes a second; the heartbeat
// workers' replies waited for the connection's lock while its flusher
// wrote (through the in-process pipe, until the server read it), and the
// requests waited in the one read loop behind the watch's updates.

// connectResponders opens the responders' connection; closeResponderConn
// closes it.
func (c *Controller) connectResponders() (*nats.Conn, error) {
	opts := append(c.nauth.connectOptions(), nats.Name("ax-controller-"+c.cfg.Node+"-responders"))
	nc, _, err := connect(c.cfg, c.srv, func(error) {}, opts...)
	if err != nil {
		return nil, fmt.Errorf("responders: %w", err)
	}
	c.respNC = nc
	return nc, nil
}

// closeResponderConn flushes the last replies and closes the responders'
// connection (after the responders were unsubscribed).
func (c *Controller) closeResponderConn() {
	if c.respNC != nil {
		_ = c.respNC.FlushTimeout(2 * time.Second)
		c.respNC.Close()
	}
}
