package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/axsched/ax/pkg/clock"
	"github.com/axsched/ax/pkg/protocol"
)

// link owns the NATS connection: registration on every (re)connect,
// heartbeats, and the command consumer.
type link struct {
	a   *Agent
	nc  *nats.Conn
	js  jetstream.JetStream
	up  chan struct{} // (re)connected, capacity 1
	hb  atomic.Int64  // heartbeat interval, ns
	reg atomic.Bool   // registered since the last connect
	// regs counts registrations and regSeq is the last outbox seq handed
	// to mem at the latest one: when regs changes (the link came back) the
	// flusher publishes the reports it holds and those up to regSeq.
	regs   atomic.Uint64
	regSeq atomic.Int64
	mem    *memOutbox // set by Run before the link runs
	// spread: reconnected, the first registration waits a random time
	// (backoff.go); busyFor: the RetryAfter of a "busy" registration reply.
	spread  atomic.Bool
	busyFor atomic.Int64
	// savedOffset is the clock offset last stored in meta, ns.
	savedOffset atomic.Int64
	// offsets filters the clock-offset samples of registration and
	// heartbeats (clockoffset.go).
	offsets offsetFilter
	// conn is nc for the reconnect delay, which nats.go may call before
	// nats.Connect returns; authFails counts consecutive connection
	// attempts refused for the agent's credentials.
	conn      atomic.Pointer[nats.Conn]
	authFails atomic.Int32

	mu       sync.Mutex
	inflight map[*context.CancelFunc]struct{} // requests to cancel when the connection drops
	cons     jetstream.ConsumeContext
	stopped  bool
	lastSeq  uint64 // last command handed to the scheduler (Apply)
}

func newLink(a *Agent) *link {
	l := &link{a: a, up: make(chan struct{}, 1)}
	l.hb.Store(int64(a.cfg.NATS.Heartbeat))
	return l
}

func (l *link) signal() {
	select {
	case l.up <- struct{}{}:
	default:
	}
}

// ready reports whether publishing can be tried.
func (l *link) ready() (jetstream.JetStream, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.js, l.nc != nil && l.nc.IsConnected()
}

func (l *link) connect() error {
	c := l.a.cfg
	opts := []nats.Option{
		nats.Name("ax-agent " + c.ID),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		// nats.go closes the connection for good after the same
		// authorization error twice in a row: an agent whose key was
		// refused for a while (a controller started without its
		// registry, a key enrolled after the agent started) would never
		// connect again. It keeps trying, backing off (reconnectDelay).
		nats.IgnoreAuthErrorAbort(),
		nats.ReconnectWait(c.NATS.ReconnectWait),
		nats.CustomReconnectDelay(l.reconnectDelay),
		nats.PingInterval(c.NATS.PingInterval),
		nats.MaxPingsOutstanding(c.NATS.MaxPingsOut),
		nats.CustomInboxPrefix(protocol.InboxPrefix(c.ID)),
		nats.ConnectHandler(func(*nats.Conn) {
			l.authFails.Store(0)
			l.a.log.Info("connected", "url", c.NATS.URL)
			l.signal()
		}),
		nats.ReconnectHandler(func(*nats.Conn) {
			l.authFails.Store(0)
			l.a.log.Info("reconnected")
			l.reg.Store(false)
			l.spread.Store(true)
			l.signal()
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if !isAuthError(err) { // refusals are logged by reconnectDelay
				l.a.log.Warn("nats error", "err", err)
			}
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			l.reg.Store(false)
			l.cancelInflight() // a heartbeat in flight would only wait for its timeout
			l.a.log.Warn("disconnected; will reconnect", "err", err)
		}),
	}
	if c.NATS.Creds != "" {
		opt, err := credsOption(c.NATS.Creds)
		if err != nil {
			return err
		}
		opts = append(opts, opt)
	}
	if c.NATS.Token != "" {
		opts = append(opts, nats.Token(c.NATS.Token))
	}
	tlsOpts, err := tlsOptions(c.NATS.TLS)
	if err != nil {
		return err
	}
	opts = append(opts, tlsOpts...)
	nc, err := nats.Connect(c.NATS.URL, opts...)
	if err != nil {
		return err
	}
	l.conn.Store(nc)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4*c.Outbox.Window))
	if err != nil {
		nc.Close()
		return err
	}
	l.mu.Lock()
	l.nc, l.js = nc, js
	l.mu.Unlock()
	if nc.IsConnected() {
		l.signal()
	}
	return nil
}

// maxAuthBackoff bounds the wait between connection attempts refused for
// the agent's credentials (unless nats.reconnect_wait is longer).
const maxAuthBackoff = 30 * time.Second

// reconnectDelay is the wait before the next round of connection attempts
// (nats.go's CustomReconnectDelay): nats.reconnect_wait plus up to a
// quarter of it at random; after attempts refused for the agent's
// credentials, doubled with every refusal up to maxAuthBackoff, each
// refusal logged with its reason.
func (l *link) reconnectDelay(int) time.Duration {
	wait := l.a.cfg.NATS.ReconnectWait
	jitter := time.Duration(rand.Int64N(int64(wait/4) + 1))
	nc := l.conn.Load()
	if nc == nil || !isAuthError(nc.LastError()) {
		l.authFails.Store(0)
		return wait + jitter
	}
	n := l.authFails.Add(1)
	d := max(wait, min(wait<<min(n, 16), maxAuthBackoff)) + jitter
	l.a.log.Error("NATS refused the agent's credentials; retrying", "err", nc.LastError(), "refusals", n, "retry_in", d,
		"hint", "is the agent enrolled (ax-controller agent enroll), and does nats.creds hold its current key?")
	return d
}

// isAuthError reports whether err is nats-server refusing the credentials.
func isAuthError(err error) bool {
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired)
}

// run keeps the link up until ctx is done.
func (l *link) run(ctx context.Context) {
	log := l.a.log
	for {
		if err := l.connect(); err != nil {
			log.Error("nats connect", "err", err)
			if !clock.Sleep(ctx, l.a.clk, l.a.cfg.NATS.ReconnectWait*4) {
				return
			}
			continue
		}
		break
	}
	defer func() {
		l.stopCommands()
		l.nc.Close()
	}()
	hbTimer := l.a.clk.NewTimer(time.Duration(l.hb.Load()))
	defer hbTimer.Stop()
	regFails, hbFails := 0, 0 // consecutive failures, for the backoff (backoff.go)
	var regAt time.Time       // no registration attempt before (backoff, spread)
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.up:
		case <-l.a.hbKick:
		case <-hbTimer.C():
		}
		if !l.nc.IsConnected() {
			hbTimer.Reset(time.Duration(l.hb.Load()))
			continue
		}
		if !l.reg.Load() {
			if l.spread.Swap(false) {
				// Reconnected, likely with every other agent (a controller
				// restart): the registrations are spread over a random wait,
				// and the backoff starts again.
				regFails = 0
				d := fullJitter(1, min(time.Duration(l.hb.Load()), 4*l.a.cfg.NATS.ReconnectWait), maxRetryBackoff, randInt64N)
				regAt = l.a.clk.Now().Add(d)
				hbTimer.Reset(d)
				continue
			}
			if now := l.a.clk.Now(); now.Before(regAt) {
				hbTimer.Reset(regAt.Sub(now)) // a signal came during the wait: keep waiting
				continue
			}
			retry := func(what string, err error) {
				regFails++
				d, answered := l.retryIn(regFails, err)
				if answered {
					regFails = 0 // the controller answered (busy): its slot, not a growing backoff
				}
				log.Warn(what+"; retrying", "err", err, "retry_in", d, "failures", regFails)
				regAt = l.a.clk.Now().Add(d)
				hbTimer.Reset(d)
			}
			if err := l.register(ctx); err != nil {
				retry("registration failed", err)
				continue
			}
			l.reg.Store(true)
			if l.mem != nil {
				l.regSeq.Store(l.mem.last())
			}
			l.regs.Add(1)
			l.a.kickOutbox()
			if err := l.startCommands(ctx); err != nil {
				l.reg.Store(false)
				retry("command consumer not started", err)
				continue
			}
			regFails, regAt = 0, time.Time{}
		} else if err := l.heartbeat(ctx); err != nil {
			hbFails++
			d := fullJitter(hbFails, time.Duration(l.hb.Load()), maxRetryBackoff, randInt64N)
			log.Warn("heartbeat failed", "err", err, "next_in", d, "failures", hbFails)
			hbTimer.Reset(d)
			continue
		} else {
			hbFails = 0
		}
		hbTimer.Reset(time.Duration(l.hb.Load()))
	}
}

// retryIn is the wait before the next registration after the n-th
// failure in a row (err): full jitter, capped (backoff.go). A busy answer
// names its own wait (the controller's slot, controller/fleet/regpool.go),
// plus up to a quarter of it at random. "No responders" means no controller is
// subscribed yet (one is starting): NATS answers at once and the
// controller bears none of it, so the backoff is capped at
// noResponderWaits heartbeat intervals, and the agents register within
// that of the controller being ready instead of up to maxRetryBackoff.
// A busy answer is an answer: the backoff starts again after it (busy).
// busy reports a busy answer: the failures counted so far start again.
func (l *link) retryIn(n int, err error) (d time.Duration, busy bool) {
	base := 2 * l.a.cfg.NATS.ReconnectWait
	if after := time.Duration(l.busyFor.Swap(0)); after > 0 {
		return after + fullJitter(1, after/4, maxRetryBackoff, randInt64N), true
	}
	if errors.Is(err, nats.ErrNoResponders) {
		return fullJitter(n, base, max(base, noResponderWaits*time.Duration(l.hb.Load())), randInt64N), false
	}
	return fullJitter(n, base, maxRetryBackoff, randInt64N), false
}

// noResponderWaits caps the backoff of registrations that found no
// controller, in heartbeat intervals.
const noResponderWaits = 2

// request sends a request and waits for its reply, up to
// nats.request_timeout or until the connection drops.
func (l *link) request(ctx context.Context, subj string, data []byte) (*nats.Msg, error) {
	rctx, cancel := context.WithTimeout(ctx, l.a.cfg.NATS.RequestTimeout)
	l.mu.Lock()
	if l.inflight == nil {
		l.inflight = map[*context.CancelFunc]struct{}{}
	}
	l.inflight[&cancel] = struct{}{}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.inflight, &cancel)
		l.mu.Unlock()
		cancel()
	}()
	return l.nc.RequestWithContext(rctx, subj, data)
}

// cancelInflight ends the requests waiting for a reply.
func (l *link) cancelInflight() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.inflight {
		(*c)()
	}
}

// errRefused marks a registration or heartbeat refused by the controller.
var errRefused = errors.New("refused by controller")

// startCommands starts the ordered consumer of this agent's commands
// after the stored cursor (once; it follows reconnects by itself).
func (l *link) startCommands(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cons != nil || l.stopped {
		return nil
	}
	cursor, err := l.cursor(ctx)
	if err != nil {
		return err
	}
	if cursor > l.lastSeq {
		l.lastSeq = cursor
	}
	cctx, cancel := context.WithTimeout(ctx, l.a.cfg.NATS.RequestTimeout)
	defer cancel()
	c, err := l.js.OrderedConsumer(cctx, protocol.StreamCommands, jetstream.OrderedConsumerConfig{
		// "<id>~<random>": the controller's consumer gateway creates
		// only consumers named for the agent (controller/auth), and the
		// random part keeps the name from other agents.
		NamePrefix:     protocol.CommandConsumerPrefix(l.a.cfg.ID) + nuid.Next(),
		FilterSubjects: []string{protocol.CommandSubject(l.a.cfg.ID)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    cursor + 1,
	})
	if err != nil {
		return err
	}
	hb := commandHeartbeat(l.a.cfg.NATS.PingInterval, l.nc.ConnectedClusterName() != "")
	cc, err := c.Consume(l.onCommand, jetstream.PullHeartbeat(hb))
	if err != nil {
		return err
	}
	l.cons = cc
	return nil
}

// maxCommandHeartbeat is the longest idle heartbeat of the command
// consumer's pulls (nats.go allows at most half the pull's 30 s expiry).
const maxCommandHeartbeat = 10 * time.Second

// commandHeartbeat is the idle heartbeat of the command consumer's pulls,
// given the connection's ping interval and whether the server is part of
// a cluster. The server sends one per heartbeat while no command comes;
// two missed make nats.go rebuild the consumer.
//
// In a cluster, the consumer's node can die while the agent's connection
// (to another node) lives: only the missed heartbeats tell, and nats.go's
// default (5s) left commands stalled ~10s after a node stopped, so it
// follows the connection's ping interval, within 1s..10s. On a lone
// server (the controller's embedded one) the consumer and the connection
// share the server: its loss drops the connection, and the ordered
// consumer is rebuilt at the reconnect, not by a heartbeat. There it is
// maxCommandHeartbeat: at 10,000 agents the 2 s default was 5,000 idle
// heartbeats a second for the server to write.
func commandHeartbeat(ping time.Duration, clustered bool) time.Duration {
	if !clustered {
		return maxCommandHeartbeat
	}
	return min(max(ping, time.Second), maxCommandHeartbeat)
}

func (l *link) onCommand(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		l.a.log.Warn("command without metadata skipped", "err", err)
		return
	}
	seq := md.Sequence.Stream
	l.mu.Lock()
	if seq <= l.lastSeq || l.stopped {
		l.mu.Unlock()
		return
	}
	l.lastSeq = seq
	l.mu.Unlock()
	l.a.sched.Apply(seq, m.Data(), nil)
}

// stopCommands stops consuming commands (shutdown).
func (l *link) stopCommands() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.cons != nil {
		l.cons.Stop()
		l.cons = nil
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
