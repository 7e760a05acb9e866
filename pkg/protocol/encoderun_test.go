package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// runCommand returns a run command of job j's execution at runAt.
func runCommand(j Job, agent string, issued, runAt time.Time, attempt int, epoch uint64) Command {
	return Command{V: Version, Kind: CmdRun, Agent: agent, IssuedAt: issued,
		Run: &Run{Job: j, ExecID: ExecID(j.ID, runAt), Attempt: attempt, RunAt: runAt, Epoch: epoch}}
}

// checkEncodeRun fails t unless EncodeRun(c, json.Marshal(job)) writes what
// Encode(c) writes, or both refuse c.
func checkEncodeRun(t *testing.T, c Command) {
	t.Helper()
	want, werr := Encode(c)
	got, gerr := EncodeRun(c, mustJSON(t, c.Run.Job))
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("Encode error %v, EncodeRun error %v", werr, gerr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeRun wrote\n%s\nEncode\n%s", got, want)
	}
}

// TestEncodeRunMatchesEncode: with the job's own bytes, EncodeRun writes
// Encode's bytes for run commands of every member set and zero, texts
// that need escapes, times in other zones, and refuses what Encode
// refuses for the command's own members (a time out of range).
func TestEncodeRunMatchesEncode(t *testing.T) {
	issued := time.Date(2026, 12, 5, 10, 0, 0, 393992084, time.UTC)
	plain := validJob()
	odd := validJob()
	odd.Name = `valve <sweep> & "q" é`
	odd.Payload = json.RawMessage(`{ "html": "<b>&</b>",  "n": [1, 2] }`)
	odd.Target = Target{Group: "site=plant-3,zone=a"}
	odd.IdempotencyKey = "k\u2028"
	odd.CreatedAt = issued.In(time.FixedZone("x", -34200))
	bare := Job{ID: jobID, Name: "n", Handler: "http", Schedule: scheduleEvery("1m"), Target: Target{Agent: "a"}}
	for _, j := range []Job{plain, odd, bare} {
		for _, tc := range []struct {
			issued, runAt time.Time
			attempt       int
			epoch         uint64
		}{
			{issued, issued.Add(time.Minute), 1, 0},
			{issued.In(time.FixedZone("y", 3600)), issued.Truncate(time.Second), MaxAttempt, 1 << 60},
			{time.Time{}, issued, 2, 7},                                  // issued_at is written when zero
			{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), issued, 1, 0}, // refused by both
		} {
			checkEncodeRun(t, runCommand(j, "edge-1", tc.issued, tc.runAt, tc.attempt, tc.epoch))
		}
	}
}

// TestEncodeRunValidates: the command's own members are validated as
// Encode validates them (the job's id included); only the job's spec is
// taken as valid.
func TestEncodeRunValidates(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	ok := runCommand(validJob(), "edge-1", at, at, 1, 0)
	job := mustJSON(t, ok.Run.Job)
	for _, tc := range []struct {
		name  string
		edit  func(c *Command)
		field string
	}{
		{"attempt 0", func(c *Command) { c.Run.Attempt = 0 }, "run.attempt"},
		{"exec id of another job", func(c *Command) { c.Run.ExecID = ExecID(NewJobID("other", at, 1), at) }, "run.exec_id"},
		{"bad agent", func(c *Command) { c.Agent = "no spaces" }, "agent"},
		{"no run time", func(c *Command) { c.Run.RunAt = time.Time{} }, "run.run_at"},
		{"a second body", func(c *Command) { c.Cancel = &Cancel{ExecID: ok.Run.ExecID} }, "kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			r := *ok.Run
			c.Run = &r
			tc.edit(&c)
			_, err := EncodeRun(c, job)
			wantField(t, err, ErrInvalid, tc.field)
		})
	}
	// The spec itself is the caller's to have validated.
	bad := ok
	r := *ok.Run
	r.Job.Handler = ""
	bad.Run = &r
	if _, err := Encode(bad); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Encode of a run whose job has no handler: %v, want ErrInvalid", err)
	}
	if _, err := EncodeRun(bad, mustJSON(t, r.Job)); err != nil {
		t.Fatalf("EncodeRun validated the job again: %v", err)
	}
}

// FuzzEncodeRunMatchesMarshal compares appendRunCommand with json.Marshal
// on run commands built from the inputs.
func FuzzEncodeRunMatchesMarshal(f *testing.F) {
	f.Add("edge-1", "ax-1", int64(1796175081), int32(393992084), int32(0), 1, uint64(0))
	f.Add("<&>\u2028\xff", "\x00\t\"\\", int64(253402300800), int32(0), int32(-34200), -3, uint64(1<<63))
	f.Add("", "", int64(-62135596800), int32(999999999), int32(45), 0, uint64(1))
	f.Fuzz(func(t *testing.T, agent, text string, sec int64, nsec int32, off int32, attempt int, epoch uint64) {
		if nsec < 0 {
			nsec = -nsec
		}
		off %= 48 * 3600
		at := time.Unix(sec, int64(nsec%1e9)).In(time.FixedZone("z", int(off)))
		j := validJob()
		j.Name = text
		c := Command{V: attempt, Kind: CommandKind(text), Agent: agent, IssuedAt: at,
			Run: &Run{Job: j, ExecID: text, Attempt: attempt, RunAt: at.Add(time.Duration(attempt)), Epoch: epoch}}
		want, werr := json.Marshal(c)
		got, gerr := appendRunCommand([]byte("prefix"), c, mustJSON(t, j))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("json.Marshal error %v, appendRunCommand error %v", werr, gerr)
		}
		if werr != nil {
			return
		}
		if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
			t.Fatalf("appendRunCommand wrote\n%s\njson.Marshal\n%s", got, want)
		}
	})
}

// BenchmarkEncodeRun: Encode against EncodeRun of a one-shot job's run
// command, the job's bytes at hand.
func BenchmarkEncodeRun(b *testing.B) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 393992084, time.UTC)
	j := validJob()
	j.Schedule = scheduleEvery("1m")
	c := runCommand(j, "edge-7", at, at, 1, 0)
	job, err := json.Marshal(j)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Encode(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("EncodeRun", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodeRun(c, job); err != nil {
				b.Fatal(err)
			}
		}
	})
}
