package controller

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// kvEntry is a jetstream.KeyValueEntry made by hand.
type kvEntry struct {
	key string
	val []byte
	rev uint64
}

func (e kvEntry) Bucket() string                  { return protocol.BucketJobs }
func (e kvEntry) Key() string                     { return e.key }
func (e kvEntry) Value() []byte                   { return e.val }
func (e kvEntry) Revision() uint64                { return e.rev }
func (e kvEntry) Created() time.Time              { return time.Time{} }
func (e kvEntry) Delta() uint64                   { return 0 }
func (e kvEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

// TestJobCacheSkipsKnownRevision: the watcher's copy of a write this
// replica already put in the cache (its own create or update, at the same
// revision) is not decoded again; a newer revision is. The value given is
// not JSON, so a decode shows as a logged error.
func TestJobCacheSkipsKnownRevision(t *testing.T) {
	jc := newJobCache()
	logs := &testutil.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	j := asapJob("edge-1")
	j.ID = "ax-ctl-20260101000000-aaaaaa"
	jc.put(j, 5)
	jc.apply(kvEntry{key: j.ID, val: []byte("not json"), rev: 5}, log)
	if strings.Contains(logs.String(), "bad job record") {
		t.Errorf("the entry at the cached revision was decoded: %s", logs.String())
	}
	if got, rev, ok := jc.get(j.ID); !ok || rev != 5 || got.Name != j.Name {
		t.Errorf("cache after the known entry: %+v at %d (%v), want the job at 5", got, rev, ok)
	}
	jc.apply(kvEntry{key: j.ID, val: []byte("not json"), rev: 6}, log)
	if !strings.Contains(logs.String(), "bad job record") {
		t.Error("the entry at a newer revision was not decoded")
	}
}
