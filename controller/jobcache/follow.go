package jobcache

import (
	"context"
	"log/slog"
	"runtime"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/kvfollow"
	"github.com/axsched/ax/internal/storedjson"
	"github.com/axsched/ax/pkg/protocol"
)

// Apply records one KV entry (a put or a delete).
func (jc *Cache) Apply(e jetstream.KeyValueEntry, log *slog.Logger) {
	if e.Operation() != jetstream.KeyValuePut {
		jc.Remove(e.Key(), e.Revision())
		return
	}
	if jc.Known(e.Key(), e.Revision()) {
		// This replica's own write, already put at its revision (CreateJob,
		// mutateJob): not decoded a second time.
		return
	}
	// The decode's target is reused (the decoder needs a pointer, so a
	// fresh one would be a heap copy per value: 125 MB of garbage for a
	// load of 300,000); put copies what it keeps.
	j := jc.decoded.Get().(*protocol.Job)
	defer jc.decoded.Put(j)
	*j = protocol.Job{}
	if err := storedjson.Unmarshal(e.Value(), j); err != nil {
		log.Error("bad job record in KV", "key", e.Key(), "err", err)
		return
	}
	jc.put(*j, e.Revision(), e.Created())
}

// Follow starts a watcher on the bucket (in runCtx), applies every
// existing job before returning, then keeps applying changes (other
// replicas' writes too) on a goroutine started by goRun.
func (jc *Cache) Follow(ctx, runCtx context.Context, kv jetstream.KeyValue, log *slog.Logger, goRun func(func(context.Context))) error {
	if st, err := kv.Status(ctx); err == nil && st.Values() > 0 {
		jc.reserve(int(st.Values())) // one allocation instead of a rehash per doubling
	}
	w, err := kv.WatchAll(runCtx)
	if err != nil {
		return err
	}
	return kvfollow.Follow(ctx, w, func(e jetstream.KeyValueEntry) { jc.Apply(e, log) }, runtime.GOMAXPROCS(0), goRun)
}
