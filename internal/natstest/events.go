package natstest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// Events records every execution event published on ax.evt.> as a plain
// NATS core subscriber (a client of the controller's server) sees it. An
// event that does not decode, or that arrives on a subject other than the
// one its state and job give (stored: its state and a partition,
// protocol.EventStoredSource), fails the test when it ends. Job
// retirements are not recorded.
type Events struct {
	mu  sync.Mutex
	all []protocol.Event
	bad []string
}

// WatchEvents subscribes to ax.evt.> on the server at url and records from
// now on; the subscription is closed when the test ends.
func WatchEvents(tb testing.TB, url string) *Events {
	tb.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		tb.Fatalf("nats connect: %v", err)
	}
	ev := &Events{}
	if _, err := nc.Subscribe(protocol.SubjectEventsAll, func(m *nats.Msg) { ev.record(m.Subject, m.Data, false) }); err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close(); ev.report(tb) })
	return ev
}

// WatchStoredEvents records the events stored in AX_EVT from now on (an
// ordered JetStream consumer, delivering new messages only); the stream
// must exist. Unlike WatchEvents it does not see a
// re-published event that the stream dropped as a duplicate of its Msg-Id.
func WatchStoredEvents(tb testing.TB, url string) *Events {
	tb.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatalf("nats connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, protocol.StreamEvents, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{protocol.SubjectEventsAll}, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		tb.Fatal(err)
	}
	ev := &Events{}
	cc, err := cons.Consume(func(m jetstream.Msg) { ev.record(m.Subject(), m.Data(), true) })
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Stop(); ev.report(tb) })
	return ev
}

// record decodes one event and checks its subject: as published, or as
// AX_EVT stores it.
func (ev *Events) record(subject string, data []byte, stored bool) {
	if protocol.IsJobRetiredSubject(subject) {
		return
	}
	e, err := protocol.DecodeEvent(data)
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if err != nil {
		ev.bad = append(ev.bad, fmt.Sprintf("%s: %v", subject, err))
		return
	}
	if want := protocol.EventSubject(e.To, e.JobID); !stored && subject != want {
		ev.bad = append(ev.bad, fmt.Sprintf("event to %s on %s, want %s", e.To, subject, want))
	}
	if stored && !storedOn(subject, e.To) {
		ev.bad = append(ev.bad, fmt.Sprintf("event to %s stored on %s, want ax.evt.%s.<partition>", e.To, subject, e.To))
	}
	ev.all = append(ev.all, e)
}

// report fails the test for each bad event recorded.
func (ev *Events) report(tb testing.TB) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	for _, b := range ev.bad {
		tb.Errorf("bad event: %s", b)
	}
}

// All returns a copy of every event recorded so far, in arrival order.
func (ev *Events) All() []protocol.Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]protocol.Event(nil), ev.all...)
}

// Of returns the events of execID in arrival order.
func (ev *Events) Of(execID string) []protocol.Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return testutil.Filter(ev.all, func(e protocol.Event) bool { return e.ExecID == execID })
}

// Path returns the states execID went through, in event order.
func (ev *Events) Path(execID string) []protocol.State {
	return States(ev.Of(execID))
}

// States returns the states es entered, in order: each event's Via, then
// its To (protocol.Event.Path), after the first event's From when that is
// PENDING.
func States(es []protocol.Event) []protocol.State {
	var out []protocol.State
	for i, e := range es {
		if i == 0 && e.From == protocol.StatePending {
			// A one-shot create's PENDING event is dropped when the
			// execution moves on within its hold (the controller's
			// eventhold.go): the first event then starts from PENDING.
			out = append(out, e.From)
		}
		out = append(out, e.Path()...)
	}
	return out
}

// Wait polls until execID's events end in last (20 s at most) and returns
// them.
func (ev *Events) Wait(tb testing.TB, execID string, last protocol.State) []protocol.Event {
	tb.Helper()
	var es []protocol.Event
	testutil.EventuallyFunc(tb, 20*time.Second, func() string {
		return fmt.Sprintf("events of %s ending in %s; have %v", execID, last, States(es))
	}, func() bool {
		es = ev.Of(execID)
		return len(es) > 0 && es[len(es)-1].To == last
	})
	return es
}

// storedOn reports whether subject is where AX_EVT stores an event to
// state: ax.evt.<state>.<n>, n below protocol.EventPartitions.
func storedOn(subject string, state protocol.State) bool {
	rest, ok := strings.CutPrefix(subject, "ax.evt."+string(state)+".")
	if !ok {
		return false
	}
	n, err := strconv.Atoi(rest)
	return err == nil && n >= 0 && n < protocol.EventPartitions
}
