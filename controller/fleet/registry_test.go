package fleet

import (
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// TestRegistryCursorOnlyRises: a heartbeat's command cursor raises the
// record in memory, never lowers it, and StoredCursors gives the cursor
// as stored in ax_agents (the removal of applied commands goes no
// further): a record read back without the heartbeat's cursor (another
// replica's write) keeps the higher one in memory, and only a stored
// record moves the stored one.
func TestRegistryCursorOnlyRises(t *testing.T) {
	r := newRegistry()
	t0 := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	stored := func(id string) uint64 {
		var got uint64
		r.StoredCursors(func(a string, c uint64) {
			if a == id {
				got = c
			}
		})
		return got
	}
	base := protocol.AgentInfo{Agent: "edge-1", RegisteredAt: t0, LastSeen: t0, Online: true, Boot: "b1", Cursor: 5}
	r.putRev(base, 1)
	if got := stored("edge-1"); got != 5 {
		t.Fatalf("stored cursor %d after the registration, want 5", got)
	}

	hb := base
	hb.LastSeen, hb.HeartbeatAt, hb.Cursor = t0.Add(time.Second), t0.Add(time.Second), 9
	r.putLive(hb)
	if got, _ := r.Get("edge-1"); got.Cursor != 9 {
		t.Fatalf("cursor in memory %d after a heartbeat's 9", got.Cursor)
	}
	if got := stored("edge-1"); got != 5 {
		t.Fatalf("stored cursor %d before any write, want 5", got)
	}
	low := hb
	low.Cursor = 3
	r.putLive(low)
	if got, _ := r.Get("edge-1"); got.Cursor != 9 {
		t.Fatalf("cursor in memory %d after a heartbeat's 3, want 9 (it only rises)", got.Cursor)
	}

	other := base // another replica's write, read before the heartbeat
	other.Labels = map[string]string{"site": "a"}
	r.putRev(other, 2)
	if got, _ := r.Get("edge-1"); got.Cursor != 9 {
		t.Fatalf("cursor in memory %d after a record without it was read, want 9", got.Cursor)
	}
	if got := stored("edge-1"); got != 5 {
		t.Fatalf("stored cursor %d, want 5 (as stored at revision 2)", got)
	}

	written, _ := r.Get("edge-1")
	r.putRev(written, 3)
	if got := stored("edge-1"); got != 9 {
		t.Fatalf("stored cursor %d after the record was written, want 9", got)
	}

	revoked := written
	revoked.Revoked = true
	r.putRev(revoked, 4)
	if got := stored("edge-1"); got != 0 {
		t.Fatalf("a revoked agent's cursor %d given, want none", got)
	}
}
