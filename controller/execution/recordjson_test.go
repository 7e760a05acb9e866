package execution

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// recordSample returns a record built from the fuzz arguments: s for the
// texts, sec and off for the times and their zone, n for the numbers,
// bits choosing which optional members are zero.
func recordSample(s string, sec int64, off int32, n int64, bits uint16) *Record {
	on := func(i uint) bool { return bits&(1<<i) == 0 }
	loc := time.UTC
	if off != 0 {
		loc = time.FixedZone("fuzz", int(off))
	}
	at := time.Unix(sec, n%1e9).In(loc)
	r := &Record{Execution: protocol.Execution{ExecID: s, JobID: s, Attempt: int(n), State: protocol.State(s),
		ScheduledAt: at, CreatedAt: at, UpdatedAt: at.Add(time.Second)}}
	if on(0) {
		r.Agent, r.Reason, r.Outcome = s, s, retry.Outcome(s)
		r.Result = &retry.Result{Code: int(n), Message: s, Retryable: on(1)}
		r.TriggeredAt, r.StartedAt, r.FinishedAt = at, at.Add(time.Millisecond), at.Add(time.Minute)
		r.Lag, r.Duration = protocol.Duration(n), protocol.Duration(-n)
		r.Shard = &protocol.ShardSlot{Index: 1, Total: int(n)}
	}
	if on(2) {
		r.Applied = []protocol.ReportKind{protocol.ReportTriggered, protocol.ReportKind(s)}
		r.Path = []protocol.State{protocol.StateTriggered, protocol.State(s)}
	} else if on(3) {
		r.Applied, r.Path = []protocol.ReportKind{}, []protocol.State{}
	}
	if on(4) {
		r.From = protocol.State(s)
	}
	r.Ends = uint8(n) * uint8(bits>>8)
	if on(5) {
		r.Sent = int(n)
	}
	r.Tracked = on(6)
	r.Suspect = on(7)
	if on(8) {
		r.Epoch = uint64(n)
		r.NextAttemptAt = at.Add(time.Hour)
		r.SkippedCount, r.FirstScheduledAt = int(n), at.Add(-time.Hour)
	}
	return r
}

func checkRecordJSON(t *testing.T, r *Record) {
	t.Helper()
	want, werr := json.Marshal(r)
	got, gerr := r.AppendJSON([]byte("prefix"))
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("json.Marshal error %v, AppendJSON error %v", werr, gerr)
	}
	if werr != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("AppendJSON wrote\n%s\njson.Marshal (after the prefix)\n%s", got, want)
	}
}

// TestRecordAppendJSON: a record's hand-written encoder writes
// json.Marshal's bytes with every member set and zero, texts that need
// escapes and times in other zones, and refuses the times it refuses.
func TestRecordAppendJSON(t *testing.T) {
	for _, s := range []string{"", "ax-1", "<&>\"\\\n\u2028\xff"} {
		for _, sec := range []int64{1796175081, 253402300800} {
			for _, off := range []int32{0, 3600, -34200} {
				for _, bits := range []uint16{0, 0xffff, 0x5555, 0xaaaa} {
					checkRecordJSON(t, recordSample(s, sec, off, 42, bits))
				}
			}
		}
	}
	checkRecordJSON(t, &Record{})
}

// FuzzRecordAppendJSON compares a record's hand-written encoder with
// json.Marshal.
func FuzzRecordAppendJSON(f *testing.F) {
	f.Add("ax-1", int64(1796175081), int32(0), int64(42), uint16(0))
	f.Add("<&>\u2028\xff", int64(253402300800), int32(-34200), int64(-7), uint16(0x5555))
	f.Fuzz(func(t *testing.T, s string, sec int64, off int32, n int64, bits uint16) {
		checkRecordJSON(t, recordSample(s, sec, off%(48*3600), n, bits))
	})
}

// BenchmarkRecordJSON: json.Marshal against AppendJSON for a finished
// execution's record.
func BenchmarkRecordJSON(b *testing.B) {
	r := recordSample("ax-ctl-20261205060000-4au8ws", 1796175081, 0, 393992084, 0x0008)
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.AppendJSON(make([]byte, 0, 1024)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
