package protocol

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/retry"
)

// appendSamples returns an execution, its event and a report that set
// every member, built from the fuzz arguments: s for the texts, sec and
// nsec for the times, off for their zone's offset (seconds east of UTC),
// d for the durations, n for the numbers, and bits choosing which
// optional members are zero.
func appendSamples(s string, sec int64, nsec int32, off int32, d int64, n int64, bits uint16) (*Execution, Event, Report) {
	on := func(i uint) bool { return bits&(1<<i) == 0 }
	loc := time.UTC
	if off != 0 {
		loc = time.FixedZone("fuzz", int(off))
	}
	at := time.Unix(sec, int64(nsec)).In(loc)
	tm := func(i uint, k int64) time.Time {
		if !on(i) {
			return time.Time{}
		}
		return at.Add(time.Duration(k) * time.Second)
	}
	str := func(i uint) string {
		if !on(i) {
			return ""
		}
		return s
	}
	var res *retry.Result
	if on(0) {
		res = &retry.Result{Code: int(n), Message: str(1), Retryable: on(2)}
	}
	var shard *ShardSlot
	if on(3) {
		shard = &ShardSlot{Index: int(n % 7), Total: int(n)}
	}
	dur := func(i uint) Duration {
		if !on(i) {
			return 0
		}
		return Duration(d)
	}
	e := &Execution{ExecID: s, JobID: s + "j", Attempt: int(n), State: State(str(4)), Agent: str(5),
		ScheduledAt: at, CreatedAt: tm(6, -1), UpdatedAt: tm(7, 1), TriggeredAt: tm(8, 2), StartedAt: tm(9, 3),
		FinishedAt: tm(10, 4), NextAttemptAt: tm(11, 5), Outcome: retry.Outcome(str(12)), Result: res,
		Reason: str(13), Suspect: on(14), Epoch: uint64(n) * uint64(bits&1), Shard: shard, Lag: dur(15),
		Duration: Duration(-d), SkippedCount: int(n) * int(bits&2), FirstScheduledAt: tm(1, -7)}
	ev := Event{V: int(n), JobID: str(2), ExecID: s, Attempt: int(n) + 1, From: State(str(3)), To: State(s),
		Reason: str(5), At: tm(6, 0), Agent: str(7), Outcome: retry.Outcome(str(8)), Result: res,
		NextAttemptAt: tm(9, 9)}
	if on(10) {
		ev.Via = []State{State(s), StateRunning}
	} else if on(11) {
		ev.Via = []State{}
	}
	if on(12) {
		ev.Execution = e
	}
	r := Report{V: int(n), Agent: str(13), JobID: s, ExecID: str(14), Attempt: int(-n), Kind: ReportKind(s),
		ScheduledAt: at, At: tm(15, 0), Epoch: e.Epoch, Outcome: e.Outcome, Result: res, Duration: dur(1),
		RetryAfter: dur(2), Lag: dur(3), Reason: str(4), Shard: shard, TriggeredAt: tm(5, 1),
		StartedAt: tm(6, 2), SkippedCount: e.SkippedCount, FirstScheduledAt: tm(7, -3)}
	return e, ev, r
}

// checkAppendJSON fails t unless v.AppendJSON writes what json.Marshal
// writes for v, or both refuse it.
func checkAppendJSON(t *testing.T, v interface {
	AppendJSON([]byte) ([]byte, error)
}) {
	t.Helper()
	want, werr := json.Marshal(v)
	got, gerr := v.AppendJSON([]byte("prefix"))
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%T: json.Marshal error %v, AppendJSON error %v", v, werr, gerr)
	}
	if werr != nil {
		if werr.Error() != gerr.Error() {
			t.Fatalf("%T: AppendJSON error %q, json.Marshal's %q", v, gerr, werr)
		}
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) {
		t.Fatalf("%T: AppendJSON lost what b held: %s", v, got)
	}
	if got = got[len("prefix"):]; !bytes.Equal(got, want) {
		t.Fatalf("%T: AppendJSON wrote\n%s\njson.Marshal\n%s", v, got, want)
	}
}

// TestAppendJSONMatchesMarshal: the hand-written encoders write
// json.Marshal's bytes for every member set and zero, for texts that
// need escapes (HTML characters, control characters, U+2028, invalid
// UTF-8), for times in other zones, and refuse the times it refuses.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	texts := []string{"", "ax-1", `q"uo\te`, "<a href='x'>&amp;</a>", "tab\tnl\ncr\r\b\f\x00\x1f\x7f",
		"é\u2028\u2029✓", "bad\xff\xfeutf8\xc3", "\U0001F600 emoji"}
	times := []struct {
		sec  int64
		nsec int32
		off  int32
	}{
		{1796175081, 393992084, 0},      // UTC, nanoseconds
		{1796175081, 0, 3600},           // +01:00, whole seconds
		{1796175081, 500000000, -34200}, // -09:30
		{1796175081, 1000, 45},          // an offset with seconds (written without them)
		{-62135596800, 0, 0},            // year 1: the zero time's second
		{253402300799, 999999999, 0},    // 9999-12-31T23:59:59.999999999Z
		{253402300800, 0, 0},            // year 10000: refused
		{-62167219200 - 86400, 0, 0},    // year -1: refused
		{1796175081, 0, 24 * 3600},      // offset of 24 hours: refused
	}
	for _, s := range texts {
		for _, tm := range times {
			for _, bits := range []uint16{0, 0xffff, 0x5555, 0xaaaa} {
				e, ev, r := appendSamples(s, tm.sec, tm.nsec, tm.off, 1500*int64(time.Millisecond), 42, bits)
				checkAppendJSON(t, e)
				checkAppendJSON(t, ev)
				checkAppendJSON(t, r)
			}
		}
	}
	// The zero values.
	checkAppendJSON(t, &Execution{})
	checkAppendJSON(t, Event{})
	checkAppendJSON(t, Report{})
}

// TestEncodeUsesAppendJSON: Encode of a report and an event (which have
// their own encoders) writes json.Marshal's bytes.
func TestEncodeUsesAppendJSON(t *testing.T) {
	at := time.Date(2026, 12, 5, 6, 0, 0, 123, time.UTC)
	job := "ax-ctl-20261205060000-4au8ws"
	exec := ExecID(job, at)
	r := Report{V: Version, Agent: "edge-1", JobID: job, ExecID: exec, Attempt: 1, Kind: ReportFinished,
		ScheduledAt: at, At: at, Outcome: retry.OutcomeSuccess, Result: &retry.Result{Code: 200, Message: "<ok>"}}
	ev := Event{V: Version, JobID: job, ExecID: exec, Attempt: 1, From: StatePending, To: StateSuccess,
		Via: []State{StateTriggered, StateRunning}, At: at, Execution: &Execution{ExecID: exec, JobID: job, Attempt: 1, State: StateSuccess}}
	for _, m := range []interface{ Validate() error }{r, ev} {
		got, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode %T: %v", m, err)
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Encode %T wrote\n%s\njson.Marshal\n%s", m, got, want)
		}
	}
}

// FuzzAppendJSONMatchesMarshal compares the hand-written encoders with
// json.Marshal on executions, events and reports built from the inputs.
func FuzzAppendJSONMatchesMarshal(f *testing.F) {
	f.Add("ax-1", int64(1796175081), int32(393992084), int32(0), int64(1500000000), int64(42), uint16(0))
	f.Add("<&>\u2028\xff", int64(253402300800), int32(0), int32(-34200), int64(-1), int64(-7), uint16(0x5555))
	f.Add("\x00\t\"\\", int64(-62135596800), int32(999999999), int32(45), int64(0), int64(0), uint16(0xffff))
	f.Fuzz(func(t *testing.T, s string, sec int64, nsec int32, off int32, d int64, n int64, bits uint16) {
		if nsec < 0 {
			nsec = -nsec
		}
		off %= 48 * 3600 // time.FixedZone takes any offset; keep it to what zones could be
		e, ev, r := appendSamples(s, sec, nsec%1e9, off, d, n, bits)
		checkAppendJSON(t, e)
		checkAppendJSON(t, ev)
		checkAppendJSON(t, r)
	})
}

// BenchmarkEncodeJSON: json.Marshal against the hand-written encoder of
// a finished execution's record, its event and its report.
func BenchmarkEncodeJSON(b *testing.B) {
	at := time.Date(2026, 12, 5, 6, 0, 0, 393992084, time.UTC)
	e := &Execution{ExecID: "ax-ctl-20261205060000-4au8ws-1796175081393", JobID: "ax-ctl-20261205060000-4au8ws", Attempt: 1,
		State: StateSuccess, Agent: "edge-17", ScheduledAt: at, CreatedAt: at, UpdatedAt: at.Add(time.Second),
		TriggeredAt: at, StartedAt: at.Add(time.Millisecond), FinishedAt: at.Add(2 * time.Millisecond),
		Outcome: retry.OutcomeSuccess, Result: &retry.Result{Code: 204}, Lag: Duration(time.Millisecond), Duration: Duration(900 * time.Microsecond)}
	ev := Event{V: Version, JobID: e.JobID, ExecID: e.ExecID, Attempt: 1, From: StatePending, Via: []State{StateTriggered, StateRunning},
		To: StateSuccess, At: e.UpdatedAt, Agent: e.Agent, Outcome: e.Outcome, Result: e.Result, Execution: e}
	r := Report{V: Version, Agent: e.Agent, JobID: e.JobID, ExecID: e.ExecID, Attempt: 1, Kind: ReportFinished, ScheduledAt: at,
		At: e.FinishedAt, Outcome: e.Outcome, Result: e.Result, Duration: e.Duration, Lag: e.Lag, TriggeredAt: at, StartedAt: e.StartedAt}
	for _, c := range []struct {
		name string
		v    interface {
			AppendJSON([]byte) ([]byte, error)
		}
	}{{"execution", e}, {"event", ev}, {"report", r}} {
		b.Run(c.name+"/json.Marshal", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/AppendJSON", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.v.AppendJSON(make([]byte, 0, 1024)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAppendJSONStringEveryByte: every byte alone, and with text around
// it, is written as json.Marshal writes it; so are the runes it escapes.
func TestAppendJSONStringEveryByte(t *testing.T) {
	var in []string
	for c := range 256 {
		in = append(in, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"z")
	}
	in = append(in, "\u2028", "\u2029", "x\u2027\u202ay", "\xc3", "\xe2\x80", "é", "\U0010ffff", "\xed\xa0\x80")
	for _, s := range in {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("AppendJSONString(%q) = %s, json.Marshal: %s", s, got, want)
		}
	}
}
