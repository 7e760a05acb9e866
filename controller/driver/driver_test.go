package driver_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/controller/driver"
	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// owner is a fixed answer to "who works the shard of this job": this
// replica (owns) or the instance named.
type owner struct {
	mu   sync.Mutex
	owns bool
	inst string
}

func (o *owner) OwnsJob(string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.owns
}

func (o *owner) OwnerInstance(string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.inst
}

// host records the changes it was asked to send; with gate set, each
// Dispatch waits for a value on it first.
type host struct {
	sent chan driver.Change
	gate chan struct{}
}

func newHost() *host { return &host{sent: make(chan driver.Change, 16)} }

func (h *host) Dispatch(_ context.Context, ch driver.Change) {
	if h.gate != nil {
		<-h.gate
	}
	h.sent <- ch
}

// got returns the change h sent, failing when none comes.
func (h *host) got(t *testing.T, what string) driver.Change {
	t.Helper()
	select {
	case ch := <-h.sent:
		return ch
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no change sent", what)
		return driver.Change{}
	}
}

// none fails when h sent a change.
func (h *host) none(t *testing.T, what string) {
	t.Helper()
	select {
	case ch := <-h.sent:
		t.Fatalf("%s: change of job %s sent here", what, ch.JobID())
	default:
	}
}

// replica is one driver on the test server, with its owner answer, its
// host and the routes it counted.
type replica struct {
	d    *driver.Driver
	own  *owner
	host *host

	mu     sync.Mutex
	routes map[driver.Route]int
}

func (r *replica) count(rt driver.Route) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes[rt]++
}

func (r *replica) counted(rt driver.Route) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.routes[rt]
}

// start makes a replica named inst on url that serves drive requests;
// opts change its Env before the driver is made.
func start(t *testing.T, url, inst string, cfg driver.Config, h *host, opts ...func(*driver.Env)) *replica {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		nc.Close()
	})
	r := &replica{own: &owner{}, host: h, routes: map[driver.Route]int{}}
	cfg.Instance = inst
	env := driver.Env{Config: cfg, Count: r.count, Owner: r.own,
		GoRun: func(fn func(context.Context)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				fn(ctx)
			}()
		}}
	for _, o := range opts {
		o(&env)
	}
	r.d = driver.New(env, h)
	sub, err := r.d.Serve(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return r
}

func job(id string, gen uint64, paused bool) *protocol.Job {
	return &protocol.Job{ID: id, Name: "j", Handler: "noop", Generation: gen, Paused: paused,
		Schedule: schedule.Spec{Every: "1m"}, Target: protocol.Target{Agent: "edge-1"}}
}

const jobID = "ax-ctl-20261204090000-abcdef"

// TestDriveRoutes: a change is sent where the job's shard is worked. The
// owner sends it itself (local); a replica that does not own it asks the
// owner, which sends it (forwarded, served), with the old and new job as
// they were; when the owner refuses (the shard moved) or is gone (no
// responders), the asking replica sends it itself (fallback) and says
// why the owner did not.
func TestDriveRoutes(t *testing.T) {
	srv := natstest.Start(t)
	a := start(t, srv.URL(), "aaaa", driver.Config{Timeout: 10 * time.Second}, newHost())
	b := start(t, srv.URL(), "bbbb", driver.Config{}, newHost())
	ctx := context.Background()
	ch := driver.Change{Old: job(jobID, 1, false), Next: job(jobID, 2, true), Rev: 7}

	// a works the shard: a sends.
	a.own.owns, a.own.inst = true, "aaaa"
	if rt, err := a.d.Drive(ctx, ch); rt != driver.RouteLocal || err != nil {
		t.Fatalf("Drive on the owner = %s, %v; want local", rt, err)
	}
	if got := a.host.got(t, "local"); got.Next.Generation != 2 {
		t.Fatalf("local change: %+v", got)
	}
	b.host.none(t, "local")

	// b works it: a asks b, b sends the change a stored.
	a.own.owns, a.own.inst = false, "bbbb"
	b.own.owns = true
	if rt, err := a.d.Drive(ctx, ch); rt != driver.RouteForwarded || err != nil {
		t.Fatalf("Drive on another replica = %s, %v; want forwarded", rt, err)
	}
	got := b.host.got(t, "forwarded")
	if got.Old == nil || got.Old.Generation != 1 || got.Next == nil || got.Next.Generation != 2 || !got.Next.Paused || got.JobID() != jobID {
		t.Fatalf("the owner sent %+v / %+v, want the change a stored", got.Old, got.Next)
	}
	a.host.none(t, "forwarded")
	if a.counted(driver.RouteForwarded) != 1 || b.counted(driver.RouteServed) != 1 {
		t.Fatalf("routes a %v, b %v", a.routes, b.routes)
	}

	// b no longer works it (its lease moved, a's view is behind): b
	// refuses, a sends.
	b.own.mu.Lock()
	b.own.owns = false
	b.own.mu.Unlock()
	rt, err := a.d.Drive(ctx, ch)
	if rt != driver.RouteFallback || !errors.Is(err, driver.ErrRefused) {
		t.Fatalf("Drive when the owner refuses = %s, %v; want fallback, ErrRefused", rt, err)
	}
	a.host.got(t, "refused")
	b.host.none(t, "refused")

	// The owner named is not there: a sends.
	a.own.inst = "cccc"
	rt, err = a.d.Drive(ctx, ch)
	if rt != driver.RouteFallback || !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("Drive to a gone owner = %s, %v; want fallback, no responders", rt, err)
	}
	a.host.got(t, "gone")

	// No owner known at all: local, without asking.
	a.own.inst = ""
	if !a.d.Local(jobID) {
		t.Fatal("Local with no owner known = false")
	}
	if rt, err := a.d.Drive(ctx, ch); rt != driver.RouteLocal || err != nil {
		t.Fatalf("Drive with no owner known = %s, %v; want local", rt, err)
	}
	a.host.got(t, "no owner")
	if a.counted(driver.RouteFallback) != 2 || a.counted(driver.RouteLocal) != 2 {
		t.Fatalf("routes of a: %v", a.routes)
	}
}

// TestDriveHoldsASilentOwner: an owner that takes the request and never
// answers (frozen, or cut off with its connection open: here a real
// subscriber that does not reply) holds one change for Config.Timeout;
// the asking replica sends it itself (ErrSilent) and, for Config.Hold,
// sends the changes of that owner's shards at once without asking it
// (ErrNotAsked, Local true). After the hold it asks again; another owner
// is asked meanwhile. The timeout is long enough for a loaded machine's
// answering owner: the forwarded step must not time out.
func TestDriveHoldsASilentOwner(t *testing.T) {
	srv := natstest.Start(t)
	var (
		mu  sync.Mutex
		now = time.Unix(1_000_000, 0)
	)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	a := start(t, srv.URL(), "aaaa", driver.Config{Timeout: 2 * time.Second, Hold: time.Minute}, newHost(),
		func(e *driver.Env) { e.Mono = clock })
	b := start(t, srv.URL(), "bbbb", driver.Config{}, newHost())
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	asked := make(chan uint64, 16) // the revisions of the changes the silent owner was asked to send
	sub, err := nc.Subscribe(driver.Subject("ssss"), func(m *nats.Msg) {
		if ch, err := driver.DecodeRequest(m.Data); err == nil {
			asked <- ch.Rev
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	nextAsked := func(what string) uint64 {
		t.Helper()
		select {
		case rev := <-asked:
			return rev
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: the silent owner was not asked", what)
			return 0
		}
	}
	ctx := context.Background()
	change := func(rev uint64) driver.Change {
		return driver.Change{Old: job(jobID, 1, false), Next: job(jobID, 2, true), Rev: rev}
	}
	a.own.inst = "ssss"
	if a.d.Local(jobID) {
		t.Fatal("Local before the owner was silent = true")
	}

	rt, err := a.d.Drive(ctx, change(7))
	if rt != driver.RouteFallback || !errors.Is(err, driver.ErrSilent) {
		t.Fatalf("Drive to a silent owner = %s, %v; want fallback, ErrSilent", rt, err)
	}
	a.host.got(t, "silent")
	if rev := nextAsked("first change"); rev != 7 {
		t.Fatalf("the silent owner was asked for revision %d, want 7", rev)
	}

	// Within the hold: sent at once, not asked.
	if !a.d.Local(jobID) {
		t.Fatal("Local within the hold = false")
	}
	rt, err = a.d.Drive(ctx, change(8))
	if rt != driver.RouteFallback || !errors.Is(err, driver.ErrNotAsked) {
		t.Fatalf("Drive within the hold = %s, %v; want fallback, ErrNotAsked", rt, err)
	}
	a.host.got(t, "held")

	// Another owner is asked all the same.
	a.own.inst = "bbbb"
	b.own.mu.Lock()
	b.own.owns = true
	b.own.mu.Unlock()
	if rt, err := a.d.Drive(ctx, change(8)); rt != driver.RouteForwarded || err != nil {
		t.Fatalf("Drive to another owner within the hold = %s, %v; want forwarded", rt, err)
	}
	b.host.got(t, "other owner")

	// After the hold the silent owner is asked again. Requests from one
	// connection arrive in order, so a request for revision 8 sent within
	// the hold would come before this one's.
	a.own.inst = "ssss"
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if a.d.Local(jobID) {
		t.Fatal("Local after the hold = true")
	}
	if rt, err := a.d.Drive(ctx, change(9)); rt != driver.RouteFallback || !errors.Is(err, driver.ErrSilent) {
		t.Fatalf("Drive after the hold = %s, %v; want fallback, ErrSilent", rt, err)
	}
	a.host.got(t, "after the hold")
	if rev := nextAsked("after the hold"); rev != 9 {
		t.Fatalf("the silent owner was asked for revision %d next, want 9 (nothing within the hold)", rev)
	}
	if a.counted(driver.RouteFallback) != 3 || a.counted(driver.RouteForwarded) != 1 {
		t.Fatalf("routes of a: %v", a.routes)
	}
}

// TestServeRefusesBadAndBusy: a request that does not decode is refused
// invalid; one beyond the workers and the queue is refused busy, and its
// sender sends the change itself. Nothing refused reaches the host.
func TestServeRefusesBadAndBusy(t *testing.T) {
	srv := natstest.Start(t)
	h := newHost()
	h.gate = make(chan struct{})
	b := start(t, srv.URL(), "bbbb", driver.Config{Workers: 1, Queue: 1}, h)
	b.own.owns = true
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	for _, bad := range []string{`{`, `{"v":1,"job":"ax-ctl-20261204090000-abcdef"}`, `{"v":2,"job":"ax-ctl-20261204090000-abcdef","next":{"id":"ax-ctl-20261204090000-abcdef"}}`} {
		m, err := nc.Request(driver.Subject("bbbb"), []byte(bad), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r, err := driver.DecodeReply(m.Data)
		if err != nil || r.Refused != driver.ReasonInvalid {
			t.Fatalf("reply to %s = %+v, %v; want refused invalid", bad, r, err)
		}
	}

	req, err := driver.EncodeRequest(driver.Change{Next: job(jobID, 1, false), Rev: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Three at once: one is taken by the worker (held at the gate), one
	// waits in the queue, one is refused. No request is done before the
	// gate opens, so the first reply is the refusal.
	inbox := nats.NewInbox()
	replies, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	opened := false
	defer func() {
		if !opened {
			close(h.gate) // let the worker end
		}
	}()
	for range 3 {
		if err := nc.PublishRequest(driver.Subject("bbbb"), inbox, req); err != nil {
			t.Fatal(err)
		}
	}
	m, err := replies.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := driver.DecodeReply(m.Data); err != nil || r.Refused != driver.ReasonBusy {
		t.Fatalf("first reply = %+v, %v; want refused busy", r, err)
	}
	opened = true
	close(h.gate)
	h.got(t, "taken")
	h.got(t, "queued")
	for range 2 {
		m, err := replies.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if r, err := driver.DecodeReply(m.Data); err != nil || !r.Done {
			t.Fatalf("reply after the gate = %+v, %v; want done", r, err)
		}
	}
	h.none(t, "the refused one")
}
