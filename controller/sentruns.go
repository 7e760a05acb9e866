package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// A replica that acquires shards (at start or by takeover) finds the
// PENDING executions placed on an agent and must make sure each one's run
// command is in AX_CMD: the record is written before the command is
// published, so a controller killed between the two leaves a record
// without its command. Re-sending every one is what an agent would not
// notice (the stream drops a Msg-Id it stored within its duplicate window,
// 2h, and the agent one it holds) but a controller would: 300,000 delayed
// one-shots cost 300,000 acknowledged publishes before the shards are
// worked, and a run older than the window is stored a second time.
//
// So the reload first reads the Msg-Ids of the run commands AX_CMD holds
// from the oldest PENDING record's placement on (headers only, nothing
// older: the cost follows the live commands, not the stream's seven
// days), and re-sends only the runs it does not find.

// runMsgID is the Msg-Id of the run command of attempt of rec.
func runMsgID(rec *execRecord, attempt int) string {
	return protocol.RunMsgID(rec.ExecID, attempt, rec.Agent, rec.Epoch)
}

// sentRunsSkew is how much earlier than a record's UpdatedAt (controller
// clock) the scan starts, for the clocks of replicas and the server.
const sentRunsSkew = 5 * time.Minute

// sentRuns returns the Msg-Ids of the commands AX_CMD holds that were
// stored at or after since (less sentRunsSkew), read with headers only.
func (c *reloader) sentRuns(ctx context.Context, since time.Time) (map[string]bool, error) {
	st, err := c.js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		return nil, fmt.Errorf("sent runs: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("sent runs: %w", err)
	}
	out := map[string]bool{}
	last := info.State.LastSeq
	start := since.Add(-sentRunsSkew)
	if info.State.Msgs == 0 || info.State.LastTime.Before(start) {
		return out, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartTimePolicy, OptStartTime: &start, HeadersOnly: true,
	})
	if err != nil {
		return nil, fmt.Errorf("sent runs: %w", err)
	}
	for {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("sent runs: %w", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
				out[id] = true
			}
			md, err := m.Metadata()
			if err == nil && md.Sequence.Stream >= last {
				return out, nil
			}
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("sent runs: %w", err)
		}
		if n == 0 {
			return out, nil // nothing more (the last messages aged out)
		}
	}
}
