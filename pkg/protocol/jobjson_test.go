package protocol

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/schedule"
)

// jobSample returns a job that sets every member, built from the fuzz
// arguments: s for the texts, payload for the payload, sec, nsec and off
// for the creation time, d for the durations, n for the numbers, and bits
// choosing which optional members are zero.
func jobSample(s string, payload []byte, sec int64, nsec int32, off int32, d int64, n int64, bits uint16) Job {
	on := func(i uint) bool { return bits&(1<<i) == 0 }
	str := func(i uint) string {
		if !on(i) {
			return ""
		}
		return s
	}
	num := func(i uint) int {
		if !on(i) {
			return 0
		}
		return int(n)
	}
	dur := func(i uint) Duration {
		if !on(i) {
			return 0
		}
		return Duration(d)
	}
	loc := time.UTC
	if off != 0 {
		loc = time.FixedZone("fuzz", int(off))
	}
	var created time.Time
	if on(15) {
		created = time.Unix(sec, int64(nsec)).In(loc)
	}
	return Job{ID: str(0), Name: s, Handler: str(1), Payload: json.RawMessage(payload),
		Schedule: schedule.Spec{Asap: on(2), At: str(3), Delay: str(4), Every: str(5), Cron: str(6), Timezone: str(7)},
		Target:   Target{Agent: str(8), Group: str(9), Mode: str(10)}, Priority: num(11), Timeout: dur(12),
		Retry:   RetrySpec{MaxAttempts: num(13), Base: dur(14), Max: dur(0), Jitter: Duration(-d), OnTimeout: on(1)},
		Misfire: MisfireSpec{Policy: str(2), Grace: dur(3), Cap: num(4)}, Overlap: str(5), Concurrency: num(6),
		IdempotencyKey: str(7), Precision: str(8), Paused: on(9), Generation: uint64(num(10)), CreatedAt: created}
}

// TestJobAppendJSONMatchesMarshal: Job.AppendJSON writes json.Marshal's
// bytes for every member set and zero, for payloads with space to
// compact, with characters json.Marshal escapes and that are not JSON,
// and refuses what json.Marshal refuses.
func TestJobAppendJSONMatchesMarshal(t *testing.T) {
	texts := []string{"", "ax-1", `q"uo\te`, "<a>&amp;", "é\u2028✓", "bad\xffutf8"}
	payloads := []string{"", `{"command":"/bin/true"}`, " { \"a\" : [ 1 , 2 ] } ", `{"url":"http://x/?a=1&b=<2>"}`,
		`"\u2028 raw"` + "\u2029", `{"a":`, `1 2`, `null`, `"x"`}
	for _, s := range texts {
		for _, p := range payloads {
			for _, bits := range []uint16{0, 0xffff, 0x5555, 0xaaaa} {
				checkAppendJSON(t, jobSample(s, []byte(p), 1796175081, 393992084, 3600, int64(90*time.Second), 3, bits))
			}
		}
	}
	checkAppendJSON(t, Job{})
	checkAppendJSON(t, jobSample("x", nil, 253402300800, 0, 0, 1, 1, 0)) // year 10000: refused
}

// FuzzJobAppendJSONMatchesMarshal compares Job.AppendJSON with
// json.Marshal on jobs built from the inputs.
func FuzzJobAppendJSONMatchesMarshal(f *testing.F) {
	f.Add("ax-1", []byte(`{"command":"/bin/true"}`), int64(1796175081), int32(393992084), int32(0), int64(1500000000), int64(42), uint16(0))
	f.Add("<&>\u2028\xff", []byte(" [1, {\"a\": \"<\"}] "), int64(253402300800), int32(0), int32(-34200), int64(-1), int64(-7), uint16(0x5555))
	f.Add("", []byte("{"), int64(-62135596800), int32(999999999), int32(45), int64(0), int64(0), uint16(0xffff))
	f.Fuzz(func(t *testing.T, s string, payload []byte, sec int64, nsec int32, off int32, d int64, n int64, bits uint16) {
		if nsec < 0 {
			nsec = -nsec
		}
		off %= 48 * 3600
		checkAppendJSON(t, jobSample(s, payload, sec, nsec%1e9, off, d, n, bits))
	})
}

// BenchmarkEncodeJob: json.Marshal against Job.AppendJSON for a pinned
// one-shot http job as a create stores it.
func BenchmarkEncodeJob(b *testing.B) {
	j := Job{ID: "ax-ctl-20261206060000-4au8ws", Name: "once", Handler: "http",
		Payload:  json.RawMessage(`{"method":"GET","url":"http://127.0.0.1:8080/hit?t=1796175081393992084"}`),
		Schedule: schedule.Spec{Asap: true}, Target: Target{Agent: "bench-1"}, Overlap: OverlapForbid,
		Misfire: MisfireSpec{Policy: "run_once"}, Generation: 1, CreatedAt: time.Date(2026, 12, 6, 6, 0, 0, 393992084, time.UTC)}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(j); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := j.AppendJSON(make([]byte, 0, 512)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
