package fleet

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/internal/admission"
	"github.com/axsched/ax/pkg/protocol"
)

// Registrations are handled by a bounded pool of workers fed by the
// registration subscription. When the queue is full the controller answers
// "busy" with a RetryAfter at once instead of letting the request time out;
// a request that waited in the queue longer than the agents' request
// timeout is dropped unprocessed (its agent gave up and will retry).
//
// The RetryAfter of a busy answer is a slot: the time the queue takes to
// drain at the rate registrations are handled (registerWorkers over the
// mean handling time), and each further busy answer a slot later, so that
// the agents told "busy" come back spread over the time the controller
// needs for them instead of together after a fixed pause (at 10,000 agents
// that made most of a storm's retries busy again).
const (
	registerWorkers = 16
	registerQueue   = 1024
	// registerMaxWait is how long a registration may wait in the queue:
	// below the agents' default nats.request_timeout (3s).
	registerMaxWait = 2 * time.Second
	// registerBusyMin and registerBusyMax bound the RetryAfter of a
	// "busy" answer.
	registerBusyMin = time.Second
	registerBusyMax = 60 * time.Second
	// registerCostStart is the handling time assumed before any was
	// measured.
	registerCostStart = 20 * time.Millisecond
	// registerSlotMax bounds a slot (at least 40 registrations a second
	// are assumed), so that a slow spell does not push a storm's slots
	// minutes ahead.
	registerSlotMax = 25 * time.Millisecond
	// Reasons of ax_agent_requests_refused_total for registrations.
	refuseBusy = "busy"
	refuseLate = "late"
)

type regRequest struct {
	msg *nats.Msg
	id  string    // the agent, from the subject
	at  time.Time // env.mono() when received
}

// regPool holds the queue of registrations waiting for a worker, and
// AX_CMD's first sequence as last read.
type regPool struct {
	once sync.Once
	q    chan regRequest
	// admitted bounds each agent's registrations in the queue (admit.go).
	admitted *admission.Admissions

	mu      sync.Mutex
	first   uint64
	firstAt time.Time // env.mono() when the read of first started

	// smu guards the admission slots of busy answers: cost is the mean
	// handling time of a registration (moving average), next the next
	// free slot (env.mono()).
	smu  sync.Mutex
	cost time.Duration
	next time.Time
}

// handled records that a registration took d to handle. The average
// starts from registerCostStart: the first registrations after a start
// are slow (cold caches, the server busy loading), and one of them alone
// would make the slots of a whole storm long.
func (p *regPool) handled(d time.Duration) {
	p.smu.Lock()
	defer p.smu.Unlock()
	if p.cost == 0 {
		p.cost = registerCostStart
	}
	p.cost += (d - p.cost) / 8
}

// admits returns how many registrations may wait in the queue: as many as
// the workers handle within registerMaxWait at the measured rate (at least
// registerWorkers, at most registerQueue). More would wait past it and be
// dropped as late: their agents time out and back off, a storm's long tail.
func (p *regPool) admits() int {
	p.smu.Lock()
	cost := p.cost
	p.smu.Unlock()
	if cost <= 0 {
		return registerQueue
	}
	n := int(registerMaxWait * 3 / 4 * registerWorkers / cost)
	return min(max(n, registerWorkers), registerQueue)
}

// retryAfter returns the RetryAfter of a busy answer given at now with
// queued registrations waiting: the next free slot after the queue drains
// at registerWorkers/cost a second, within registerBusyMin..registerBusyMax.
func (p *regPool) retryAfter(now time.Time, queued int) time.Duration {
	p.smu.Lock()
	defer p.smu.Unlock()
	cost := p.cost
	if cost <= 0 {
		cost = registerCostStart
	}
	per := min(cost/registerWorkers, registerSlotMax) // one slot
	if drained := now.Add(time.Duration(queued) * per); p.next.Before(drained) {
		p.next = drained
	}
	d := p.next.Sub(now)
	if d < registerBusyMax {
		p.next = p.next.Add(per)
	}
	return min(max(d, registerBusyMin), registerBusyMax)
}

// firstSeq returns AX_CMD's first sequence as read after received: one
// read serves every registration that arrived before it started (a
// registration storm does not ask the stream for each agent), and none
// sees a value older than its own arrival.
func (p *regPool) firstSeq(ctx context.Context, e *env, received time.Time) (uint64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.firstAt.IsZero() && !p.firstAt.Before(received) {
		return p.first, nil
	}
	start := e.mono()
	s, err := e.js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		return 0, err
	}
	p.first, p.firstAt = s.CachedInfo().State.FirstSeq, start
	return p.first, nil
}

// enqueueRegister is the registration subscription's handler. A request
// whose reply subject is not the agent's inbox is dropped here, before it
// takes a place in the queue; one the agent's bounds refuse (admit.go)
// or that finds the queue full is answered "busy" at once.
func (f *Fleet) enqueueRegister(msg *nats.Msg) {
	f.regs.once.Do(func() { f.regs.q = make(chan regRequest, registerQueue) })
	id := strings.TrimPrefix(msg.Subject, "ax.reg.")
	if !f.replyAllowed(endpointRegister, id, msg) {
		return
	}
	now := f.mono()
	if ok, wait := f.regs.admitted.Admit(id, now); !ok {
		f.m.agentRefused.WithLabelValues(endpointRegister, refuseRepeat).Inc()
		respond(msg, protocol.RegisterReply{V: protocol.Version, Error: "a registration of this agent is in progress or was just made, retry later",
			RetryAfter: protocol.Duration(max(wait, registerBusyMin))})
		return
	}
	if n := len(f.regs.q); n >= f.regs.admits() {
		f.regs.admitted.Forget(id)
		f.regBusy(msg, n)
		return
	}
	select {
	case f.regs.q <- regRequest{msg: msg, id: id, at: now}:
	default:
		f.regs.admitted.Forget(id)
		f.regBusy(msg, len(f.regs.q))
	}
}

// regBusy answers a registration "busy" with its slot (queued waiting).
func (f *Fleet) regBusy(msg *nats.Msg, queued int) {
	f.m.agentRefused.WithLabelValues(endpointRegister, refuseBusy).Inc()
	respond(msg, protocol.RegisterReply{V: protocol.Version, Error: "controller busy, retry later",
		RetryAfter: protocol.Duration(f.regs.retryAfter(f.mono(), queued))})
}

// startRegisterWorkers starts the workers that handle queued registrations.
func (f *Fleet) startRegisterWorkers() {
	f.regs.once.Do(func() { f.regs.q = make(chan regRequest, registerQueue) })
	for range registerWorkers {
		f.goRun(f.registerWorker)
	}
}

func (f *Fleet) registerWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-f.regs.q:
			// Out of the queue: the agent's next registration may wait
			// there (within the agent's interval) while this one is
			// handled, so that the reply of this one never finds the
			// next refused as in progress.
			f.regs.admitted.Release(r.id)
			if f.mono().Sub(r.at) > registerMaxWait {
				f.m.agentRefused.WithLabelValues(endpointRegister, refuseLate).Inc()
				continue
			}
			t0 := f.mono()
			f.handleRegister(r.msg, r.at)
			f.regs.handled(f.mono().Sub(t0))
		}
	}
}
