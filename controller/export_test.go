package controller

// Test-only hooks of the controller (compiled into its tests alone).

// abandon drops the controller the way a crash would, for tests: the NATS
// connection is closed at once (unacknowledged reports are redelivered to
// the next controller after the ack wait) and nothing is flushed.
func (c *core) abandon() {
	c.lifeMu.Lock()
	c.state = lifeClosed
	c.lifeMu.Unlock()
	c.crashed.Store(true)
	if c.nc != nil {
		c.nc.Close()
	}
	c.shutdown()
}
