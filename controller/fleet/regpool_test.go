package fleet

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// sendRegister publishes agent id's registration on nc with replies to
// inbox and returns at once.
func sendRegister(t *testing.T, nc *nats.Conn, id, inbox string) {
	t.Helper()
	data, err := protocol.Encode(protocol.Register{V: protocol.Version, Agent: id, Handlers: []string{"noop"},
		Version: "test", OS: "linux", Arch: "arm64", SentAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest(protocol.RegisterSubject(id), inbox, data); err != nil {
		t.Fatal(err)
	}
}

// A controller whose registration queue is full answers "busy" with a
// RetryAfter at once instead of leaving the agent to time out; the queued
// ones are handled once the workers are free (or dropped when they waited
// past registerMaxWait).
func TestRegistrationBusyWhenQueueFull(t *testing.T) {
	c := newTestFleet(t)
	n := registerWorkers + registerQueue + 20
	nc, err := nats.Connect(c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var busy, ok atomic.Int64
	var mu sync.Mutex
	var after []time.Duration // RetryAfter of the busy answers
	sub, err := nc.Subscribe(protocol.InboxPrefix("*")+".r", func(m *nats.Msg) {
		r, err := protocol.DecodeRegisterReply(m.Data)
		switch {
		case err != nil:
			t.Errorf("reply: %v", err)
		case r.Error != "" && r.RetryAfter > 0:
			mu.Lock()
			after = append(after, r.RetryAfter.D())
			mu.Unlock()
			busy.Add(1)
		case r.Error == "":
			ok.Add(1)
		default:
			t.Errorf("refused: %s", r.Error)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c.assignMu.Lock() // the workers block on it: the queue fills
	locked := true
	defer func() {
		if locked {
			c.assignMu.Unlock()
		}
	}()
	for i := range n {
		id := fmt.Sprintf("edge-%d", i)
		sendRegister(t, nc, id, protocol.InboxPrefix(id)+".r")
	}
	eventually(t, 20*time.Second, "busy answers", func() bool { return busy.Load() >= 20 })
	locked = false
	c.assignMu.Unlock()
	eventually(t, 60*time.Second, "the queued registrations answered or dropped as late", func() bool {
		late := testutil.MetricValue(t, c.m.agentRefused.WithLabelValues(endpointRegister, refuseLate))
		return busy.Load()+ok.Load()+int64(late) == int64(n)
	})
	if ok.Load() < registerWorkers {
		t.Fatalf("%d registrations answered, want at least %d", ok.Load(), registerWorkers)
	}
	if got := testutil.MetricValue(t, c.m.agentRefused.WithLabelValues(endpointRegister, refuseBusy)); got != float64(busy.Load()) {
		t.Fatalf("refused{busy} = %v, want %d", got, busy.Load())
	}
	// The busy answers, given in a burst, name successive slots: their
	// agents come back spread at the rate registrations are handled, not
	// all after the same pause.
	mu.Lock()
	defer mu.Unlock()
	slot := registerCostStart / registerWorkers
	lo, hi := slices.Min(after), slices.Max(after)
	if hi-lo < time.Duration(len(after)/2)*slot || lo < registerBusyMin {
		t.Fatalf("%d busy answers with retry_after %s..%s, want at least %s and spread over %s (a slot of %s each)",
			len(after), lo, hi, registerBusyMin, time.Duration(len(after)/2)*slot, slot)
	}
}

// A registration that waited in the queue longer than registerMaxWait is
// dropped unprocessed: its agent gave up already.
func TestLateRegistrationDropped(t *testing.T) {
	var skew atomic.Int64
	e := testEnv("ctl-a")
	e.Mono = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	c := startFleet(t, natstest.Start(t).URL(), e)
	nc, err := nats.Connect(c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c.assignMu.Lock()
	locked := true
	defer func() {
		if locked {
			c.assignMu.Unlock()
		}
	}()
	for i := range registerWorkers + 1 {
		id := fmt.Sprintf("edge-%d", i)
		sendRegister(t, nc, id, protocol.InboxPrefix(id)+".r")
	}
	eventually(t, 10*time.Second, "one registration queued behind the busy workers", func() bool {
		return len(c.regs.q) == 1
	})
	skew.Store(int64(registerMaxWait + time.Second))
	locked = false
	c.assignMu.Unlock()
	// The queued one is dropped (and any a worker took but had not yet
	// checked when the clock jumped); the others are registered.
	late := func() int {
		return int(testutil.MetricValue(t, c.m.agentRefused.WithLabelValues(endpointRegister, refuseLate)))
	}
	eventually(t, 10*time.Second, "the late registration dropped", func() bool { return late() >= 1 })
	eventually(t, 10*time.Second, "the others registered", func() bool {
		known := 0
		for i := range registerWorkers + 1 {
			if a, ok := c.agents.Get(fmt.Sprintf("edge-%d", i)); ok && Registered(a) {
				known++
			}
		}
		return known+late() == registerWorkers+1
	})
}

// When registrations take long (here 1 s each), no more are queued than
// the workers handle within registerMaxWait: the others are answered
// "busy" with a slot at once instead of waiting in the queue past it and
// being dropped as late (their agents timed out and backed off).
func TestRegistrationQueueSizedToRate(t *testing.T) {
	c := newTestFleet(t)
	c.regs.handled(time.Second) // as measured: 16 workers, 1 s each
	admits := c.regs.admits()
	if admits >= registerQueue {
		t.Fatalf("admits %d with 1 s registrations, want fewer than %d", admits, registerQueue)
	}
	nc, err := nats.Connect(c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var busy atomic.Int64
	sub, err := nc.Subscribe(protocol.InboxPrefix("*")+".r", func(m *nats.Msg) {
		if r, err := protocol.DecodeRegisterReply(m.Data); err == nil && r.Error != "" && r.RetryAfter > 0 {
			busy.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c.assignMu.Lock() // the workers block on it: the queue fills
	defer c.assignMu.Unlock()
	const extra = 10
	for i := range registerWorkers + admits + extra {
		id := fmt.Sprintf("edge-%d", i)
		sendRegister(t, nc, id, protocol.InboxPrefix(id)+".r")
	}
	eventually(t, 20*time.Second, fmt.Sprintf("%d busy answers", extra), func() bool { return busy.Load() >= extra })
	if n := len(c.regs.q); n > admits {
		t.Fatalf("%d registrations queued, want at most %d", n, admits)
	}
}

// One slow registration (the first after a start) does not push a
// storm's slots far ahead: 100 busy answers after it end within 100
// slots of at most registerSlotMax (it made each slot 125 ms, 12.5 s in
// all).
func TestBusySlotsAfterOneSlowRegistration(t *testing.T) {
	var p regPool
	p.handled(2 * time.Second)
	now := time.Now()
	var last time.Duration
	for range 100 {
		last = p.retryAfter(now, 0)
	}
	if limit := 100 * registerSlotMax; last > limit {
		t.Fatalf("the 100th busy answer after one 2 s registration waits %s, want at most %s", last, limit)
	}
}
