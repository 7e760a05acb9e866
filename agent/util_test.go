package agent

import "sync/atomic"

type atomicCounter struct{ n atomic.Int64 }

func (c *atomicCounter) inc()       { c.n.Add(1) }
func (c *atomicCounter) get() int64 { return c.n.Load() }
