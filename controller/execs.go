package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/execstore"
	"github.com/axsched/ax/controller/execution"
)

// execRecord is an execution as stored in KV ax_execs (execution.Record).
type execRecord = execution.Record

func decodeExec(b []byte) (*execRecord, error) { return execution.Decode(b) }

// execs returns the execution store over the current ax_execs bucket.
func (c *execService) execs() execstore.Store {
	return execstore.New(c.kv.Execs, c.js, asyncStallWait).WithMarkerTTL(c.markerTTL)
}

// readExec reads an execution; a missing one is (nil, 0, nil). A record a
// create holds (createheld.go) is stored first.
func (c *execService) readExec(ctx context.Context, id string) (execstore.Version, error) {
	c.storeHeldRecord(ctx, id)
	return c.execs().Get(ctx, id)
}

// execsLastSeq returns the sequence of the last message the executions
// bucket's stream holds (0 when it holds none). Not the stream's LastSeq:
// the retention sweeper purges keys with their markers (controller/retention), so
// the last sequence issued may be gone, and a scan waiting for it would
// wait for its stall timeout.
func (c *execService) execsLastSeq(ctx context.Context) (uint64, error) {
	st, err := c.js.Stream(ctx, execstore.Stream)
	if err != nil {
		return 0, fmt.Errorf("scan executions: %w", err)
	}
	m, err := c.kvGuard.lastMsg(ctx, st, execstore.AllKeys)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("scan executions: %w", err)
	}
	return m.Sequence, nil
}
