package controller

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/streams"
)

// reloadGuard keeps the embedded server's option reloads (auth.Apply on
// enroll and revoke) apart from the controller's KV reads.
//
// nats-server v2.15.2 reads its options without their lock when it
// answers a direct get (stream.go, getDirectRequest: s.opts.MaxPending),
// and a reload replaces them (setOpts): a data race inside the server
// that -race reports whenever a KV Get meets a reload. KV Get and
// GetRevision, and the controller's last-message reads (lastMsg), hold
// the read side, a reload the write side; reloads are rare (enrollment,
// revocation) and short.
type reloadGuard struct{ mu sync.RWMutex }

// guardedKV is a KeyValue whose reads hold the guard's read side.
type guardedKV struct {
	jetstream.KeyValue
	g *reloadGuard
}

// Get reads a key, outside any reload.
func (k guardedKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	k.g.mu.RLock()
	defer k.g.mu.RUnlock()
	return k.KeyValue.Get(ctx, key)
}

// GetRevision reads one revision of a key, outside any reload.
func (k guardedKV) GetRevision(ctx context.Context, key string, rev uint64) (jetstream.KeyValueEntry, error) {
	k.g.mu.RLock()
	defer k.g.mu.RUnlock()
	return k.KeyValue.GetRevision(ctx, key, rev)
}

// guard returns b with every bucket's reads under g.
func (g *reloadGuard) guard(b streams.Buckets) streams.Buckets {
	w := func(kv jetstream.KeyValue) jetstream.KeyValue {
		if kv == nil {
			return nil
		}
		return guardedKV{KeyValue: kv, g: g}
	}
	return streams.Buckets{Jobs: w(b.Jobs), Execs: w(b.Execs), Idem: w(b.Idem), Agents: w(b.Agents),
		Leases: w(b.Leases), Epochs: w(b.Epochs), Liveness: w(b.Liveness), Marks: w(b.Marks)}
}

// reload runs f (a server options reload) with no KV read in flight.
func (g *reloadGuard) reload(f func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return f()
}

// lastMsg is st.GetLastMsgForSubject (a direct get on KV streams) outside
// any reload.
func (g *reloadGuard) lastMsg(ctx context.Context, st jetstream.Stream, subject string) (*jetstream.RawStreamMsg, error) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return st.GetLastMsgForSubject(ctx, subject)
}
