package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/pkg/protocol"
)

// A replica that acquires shards (at start or by takeover) finds the
// PENDING executions placed on an agent and must make sure each one's run
// command is in AX_CMD: the record is written before the command is
// published, so a controller killed between the two leaves a record
// without its command. Re-sending every one is what an agent would not
// notice (it stores an attempt once) but a controller would: 300,000
// delayed one-shots cost 300,000 acknowledged publishes before the shards
// are worked, each stored a second time (AX_CMD keeps no de-duplication
// window to speak of: streams.CommandDuplicates).
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
// stored at or after since (less sentRunsSkew), read with headers only;
// about is how many to expect (a size hint). The messages are pulled
// ahead, sentRunsPull at a time, while the ids are taken; a read that
// waits sentRunsIdle for the next one ends (the stream's last messages
// aged out before they were read).
func (c *reloader) sentRuns(ctx context.Context, since time.Time, about int) (map[string]bool, error) {
	st, err := c.js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		return nil, fmt.Errorf("sent runs: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("sent runs: %w", err)
	}
	out := make(map[string]bool, about)
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
	it, err := cons.Messages(jetstream.PullMaxMessages(sentRunsPull), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("sent runs: %w", err)
	}
	defer it.Stop()
	// The caller's end stops the iterator (one hook for the whole read,
	// not a context per message).
	defer context.AfterFunc(ctx, it.Stop)()
	for {
		m, err := it.Next(jetstream.NextMaxWait(sentRunsIdle))
		if ctx.Err() != nil {
			return nil, fmt.Errorf("sent runs: %w", ctx.Err())
		}
		if errors.Is(err, nats.ErrTimeout) {
			return out, nil // nothing more (the last messages aged out)
		}
		if err != nil {
			return nil, fmt.Errorf("sent runs: %w", err)
		}
		if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
			out[id] = true
		}
		if md, err := m.Metadata(); err == nil && md.Sequence.Stream >= last {
			return out, nil
		}
	}
}

// sentRunsPull is how many messages sentRuns keeps pulled ahead, and
// sentRunsIdle how long it waits for the next one.
const (
	sentRunsPull = 4096
	sentRunsIdle = 5 * time.Second
)
