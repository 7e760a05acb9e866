package protocol

import (
	"fmt"
	"regexp"
	"testing"
	"time"
)

func TestNewJobIDForm(t *testing.T) {
	id := NewJobID("edge-ctl_1", t0, 0xFFFFFFFF)
	re := regexp.MustCompile(`^ax-edge-ctl_1-20261129120000-[0-9a-z]{6}$`)
	if !re.MatchString(id) {
		t.Fatalf("job id %q does not match %s", id, re)
	}
	if err := ValidateJobID("id", id); err != nil {
		t.Fatalf("own id rejected: %v", err)
	}
	if a, b := NewJobID("n", t0, 1), NewJobID("n", t0, 2); a == b {
		t.Fatalf("different random parts gave the same id %q", a)
	}
	// Local times are written in UTC.
	loc := time.FixedZone("X", 3*3600)
	if got := NewJobID("n", t0.In(loc), 0); got != NewJobID("n", t0, 0) {
		t.Fatalf("time zone changed the id: %q", got)
	}
}

func TestValidateJobID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{jobID, true},
		{"ax-a-b-c-20261129120000-abcdef", true},
		{"", false},
		{"job-1", false},
		{"ax--20261129120000-abcdef", false},
		{"ax-n-20261329120000-abcdef", false},   // month 13
		{"ax-n-20261129120000-ABCDEF", false},   // upper case random
		{"ax-n-20261129120000-abcde", false},    // short random
		{"ax-n.x-20261129120000-abcdef", false}, // dot unsafe for subjects
		{"ax-n*-20261129120000-abcdef", false},
		{"ax-n-2026112912000x-abcdef", false},
		{"ax-n_20261129120000_abcdef", false},
	} {
		err := ValidateJobID("id", tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateJobID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil {
			wantField(t, err, ErrInvalid, "id")
		}
	}
}

func TestExecIDRoundTrip(t *testing.T) {
	sched := time.UnixMilli(1796000000123).UTC()
	for _, id := range []string{ExecID(jobID, sched), BroadcastExecID(jobID, sched, 7)} {
		gotJob, gotSched, err := ParseExecID("exec_id", id)
		if err != nil {
			t.Fatalf("ParseExecID(%q): %v", id, err)
		}
		if gotJob != jobID || !gotSched.Equal(sched) {
			t.Fatalf("ParseExecID(%q) = %q %v, want %q %v", id, gotJob, gotSched, jobID, sched)
		}
	}
	if ExecID(jobID, sched) != jobID+"-1796000000123" {
		t.Fatalf("ExecID form changed: %q", ExecID(jobID, sched))
	}
	if ExecID(jobID, sched) != ExecID(jobID, sched.Add(100*time.Microsecond)) {
		t.Fatal("exec id must be deterministic at millisecond resolution")
	}
}

func TestParseExecIDRejects(t *testing.T) {
	for _, id := range []string{
		"", "-", jobID, jobID + "-", jobID + "-x", jobID + "-+5", jobID + "--5",
		"ax-bad-1796000000123", jobID + "-1796000000123_", jobID + "-1796000000123_x", jobID + "-1796000000123_-1",
	} {
		if _, _, err := ParseExecID("exec_id", id); err == nil {
			t.Errorf("ParseExecID(%q) accepted", id)
		} else {
			wantField(t, err, ErrInvalid, "exec_id")
		}
	}
}

func TestReportMsgID(t *testing.T) {
	r := Report{ExecID: "e", Attempt: 3, Kind: ReportFinished}
	if got := r.MsgID(); got != "e/3/finished" {
		t.Fatalf("MsgID = %q", got)
	}
}

func TestSubjects(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{CommandSubject("edge-7"), "ax.cmd.edge-7"},
		{ReportSubject(3, "edge-7"), "ax.rpt.3.edge-7"},
		{ReportShardSubject(3), "ax.rpt.3.>"},
		{EventSubject(StateFailed, jobID), "ax.evt.FAILED." + jobID},
		{RegisterSubject("edge-7"), "ax.reg.edge-7"},
		{HeartbeatSubject("edge-7"), "ax.hb.edge-7"},
		{InboxPrefix("edge-7"), "_INBOX_ax.edge-7"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestShardStableAndInRange(t *testing.T) {
	counts := make([]int, DefaultShards)
	for i := 0; i < 1000; i++ {
		id := NewJobID("n", t0, uint32(i*7919))
		s := Shard(id, DefaultShards)
		if s < 0 || s >= DefaultShards {
			t.Fatalf("shard %d out of range", s)
		}
		if s != Shard(id, DefaultShards) {
			t.Fatal("shard not stable")
		}
		counts[s]++
	}
	for i, c := range counts {
		if c == 0 {
			t.Errorf("shard %d got no job of 1000: hash spreads badly", i)
		}
	}
	if Shard(jobID, 1) != 0 {
		t.Fatal("one shard must be shard 0")
	}
}

// TestCommandAndEventMsgIDs: the Msg-Ids of runs, runs sent again, cancels
// and events, as the streams de-duplicate them.
func TestCommandAndEventMsgIDs(t *testing.T) {
	const x = "ax-n-20260101000000-abcdef-1767225600000"
	for _, tc := range []struct{ got, want string }{
		{RunMsgID(x, 1, "edge-1", 0), "run/" + x + "/1/edge-1"},
		{RunMsgID(x, 2, "edge-1", 7), "run/" + x + "/2/edge-1/7"},
		{RunAgainMsgID(x, 2, "edge-1", 42), "run/" + x + "/2/edge-1/after/42"},
		{CancelMsgID(x, 3), "cancel/" + x + "/3"},
		{EventMsgID(x, 1, StateSuccess), "evt/" + x + "/1/SUCCESS"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestJobIDTimeMatchesParse: validJobIDTime accepts exactly what
// time.Parse(jobIDTimeFmt, ...) accepts, over the edges of each field
// (leap years, month lengths) and malformed texts.
func TestJobIDTimeMatchesParse(t *testing.T) {
	cases := []string{"20261129120000", "20240229000000", "20230229000000", "21000229000000", "20000229235959",
		"00000101000000", "99991231235959", "20261131000000", "20261130000000", "20261200000000", "20261301000000",
		"20261001240000", "20261001236000", "20261001235960", "20260100000000", "2026112912000", "202611291200000",
		"2026112912000a", "+0261129120000", " 0261129120000", "20261129120000\x00", "", "２０２６1129120000"}
	for y := 1999; y <= 2001; y++ {
		for m := 0; m <= 13; m++ {
			for d := 0; d <= 32; d++ {
				cases = append(cases, fmt.Sprintf("%04d%02d%02d235959", y, m, d))
			}
		}
	}
	for _, ts := range cases {
		_, err := time.Parse(jobIDTimeFmt, ts)
		if got := validJobIDTime(ts); got != (err == nil) {
			t.Errorf("validJobIDTime(%q) = %v, time.Parse error %v", ts, got, err)
		}
	}
}

// FuzzJobIDTimeMatchesParse holds validJobIDTime to time.Parse on texts
// of the time part's length, the only ones ValidateJobID gives it
// (time.Parse also takes a fraction of a second after the seconds, which
// a job id cannot hold).
func FuzzJobIDTimeMatchesParse(f *testing.F) {
	f.Add("20261129120000")
	f.Add("20240229000000")
	f.Add("20261131246060")
	f.Fuzz(func(t *testing.T, ts string) {
		if len(ts) != len(jobIDTimeFmt) {
			if validJobIDTime(ts) {
				t.Fatalf("validJobIDTime(%q) = true for a text of %d bytes", ts, len(ts))
			}
			return
		}
		_, err := time.Parse(jobIDTimeFmt, ts)
		if got := validJobIDTime(ts); got != (err == nil) {
			t.Fatalf("validJobIDTime(%q) = %v, time.Parse error %v", ts, got, err)
		}
	})
}

// BenchmarkValidateJobID: the check every report, run and job makes of a
// job id.
func BenchmarkValidateJobID(b *testing.B) {
	id := NewJobID("ctl-1", time.Date(2026, 12, 5, 11, 0, 0, 0, time.UTC), 12345)
	b.ReportAllocs()
	for b.Loop() {
		if err := ValidateJobID("job_id", id); err != nil {
			b.Fatal(err)
		}
	}
}
