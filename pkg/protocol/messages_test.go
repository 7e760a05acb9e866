package protocol

import (
	"encoding/json"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/retry"
)

var sched = time.UnixMilli(1796000000000).UTC()

func sampleMessages() map[string]interface{ Validate() error } {
	job := validJob()
	execID := ExecID(jobID, sched)
	return map[string]interface{ Validate() error }{
		"assign": Command{V: Version, Kind: CmdAssign, Agent: "edge-7", IssuedAt: t0,
			Assign: &Assign{Job: job, Shard: &ShardSlot{Index: 1, Total: 3}}},
		"unassign": Command{V: Version, Kind: CmdUnassign, Agent: "edge-7", IssuedAt: t0, Unassign: &Unassign{JobID: jobID, Generation: 2}},
		"run": Command{V: Version, Kind: CmdRun, Agent: "edge-7", IssuedAt: t0,
			Run: &Run{Job: job, ExecID: execID, Attempt: 2, RunAt: sched}},
		"cancel":       Command{V: Version, Kind: CmdCancel, Agent: "edge-7", IssuedAt: t0, Cancel: &Cancel{ExecID: execID}},
		"lease_grant":  Command{V: Version, Kind: CmdLeaseGrant, Agent: "edge-7", IssuedAt: t0, Lease: &Lease{JobID: jobID, Epoch: 3, TTL: Duration(10 * time.Second)}},
		"lease_revoke": Command{V: Version, Kind: CmdLeaseRevoke, Agent: "edge-7", IssuedAt: t0, Lease: &Lease{JobID: jobID, Epoch: 3}},
		"report": Report{V: Version, Agent: "edge-7", JobID: jobID, ExecID: execID, Attempt: 1, Kind: ReportFinished,
			ScheduledAt: sched, At: sched.Add(time.Second), Outcome: retry.OutcomeFailure,
			Result: &retry.Result{Code: 503, Message: "busy", Retryable: true}, Duration: Duration(time.Second), RetryAfter: Duration(2 * time.Second)},
		"register": Register{V: Version, Agent: "edge-7", Labels: map[string]string{"site": "plant-3"}, Handlers: []string{"exec", "http"},
			Version: "1.0.0", OS: "linux", Arch: "arm64", Cursor: 42, SentAt: t0, Leases: []HeldLease{{JobID: jobID, Epoch: 1}}},
		"register_reply":  RegisterReply{V: Version, ControllerTime: t0, Shards: 16, HeartbeatInterval: Duration(5 * time.Second)},
		"heartbeat":       Heartbeat{V: Version, Agent: "edge-7", SentAt: t0, Stats: Stats{Pending: 3, LagP99: Duration(time.Millisecond)}, Cursor: 42},
		"heartbeat_reply": HeartbeatReply{V: Version, ControllerTime: t0, Renewed: []Lease{{JobID: jobID, Epoch: 1, TTL: Duration(time.Second)}}},
		"event": Event{V: Version, JobID: jobID, ExecID: execID, Attempt: 1, From: StatePending, Via: []State{StateTriggered, StateRunning}, To: StateRetryWaiting,
			Reason: "retryable", At: t0, Agent: "edge-7", NextAttemptAt: t0.Add(time.Second),
			Execution: &Execution{ExecID: execID, JobID: jobID, Attempt: 1, State: StateRetryWaiting, Agent: "edge-7",
				ScheduledAt: sched, CreatedAt: t0, UpdatedAt: t0, NextAttemptAt: t0.Add(time.Second), Outcome: retry.OutcomeFailure}},
		"job_retired": JobRetired{V: Version, Job: job, At: t0},
	}
}

func decodeAny(kind string, b []byte) (any, error) {
	switch kind {
	case "report":
		return DecodeReport(b)
	case "register":
		return DecodeRegister(b)
	case "register_reply":
		return DecodeRegisterReply(b)
	case "heartbeat":
		return DecodeHeartbeat(b)
	case "heartbeat_reply":
		return DecodeHeartbeatReply(b)
	case "event":
		return DecodeEvent(b)
	case "job_retired":
		return DecodeJobRetired(b)
	default:
		return DecodeCommand(b)
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	for kind, m := range sampleMessages() {
		t.Run(kind, func(t *testing.T) {
			b, err := Encode(m)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			got, err := decodeAny(kind, b)
			if err != nil {
				t.Fatalf("decode %s: %v", b, err)
			}
			if !reflect.DeepEqual(reflectValue(got), reflectValue(m)) {
				t.Fatalf("round trip changed the message:\n got %+v\nwant %+v", got, m)
			}
		})
	}
}

// reflectValue normalises through JSON so that time zones and nil-vs-empty do not matter.
func reflectValue(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// mutate decodes a sample into a map, applies fn and re-encodes it.
func mutate(t *testing.T, kind string, fn func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(mustJSON(t, sampleMessages()[kind]), &m); err != nil {
		t.Fatal(err)
	}
	fn(m)
	return mustJSON(t, m)
}

func TestDecodersRejectNamingTheField(t *testing.T) {
	big := strings.Repeat("x", MaxMessageSize)
	for _, tc := range []struct {
		name, kind string
		fn         func(m map[string]any)
		sentinel   error
		field      string
	}{
		{"no version", "report", func(m map[string]any) { delete(m, "v") }, ErrVersion, "v"},
		{"future version", "report", func(m map[string]any) { m["v"] = Version + 1 }, ErrVersion, "v"},
		{"version string", "report", func(m map[string]any) { m["v"] = "1" }, ErrVersion, "v"},
		{"unknown field", "report", func(m map[string]any) { m["colour"] = "red" }, ErrInvalid, "colour"},
		{"unsafe agent", "report", func(m map[string]any) { m["agent"] = "a.>" }, ErrInvalid, "agent"},
		{"exec of other job", "report", func(m map[string]any) { m["exec_id"] = ExecID(NewJobID("x", t0, 1), sched) }, ErrInvalid, "exec_id"},
		{"attempt zero", "report", func(m map[string]any) { m["attempt"] = 0 }, ErrInvalid, "attempt"},
		{"unknown kind", "report", func(m map[string]any) { m["kind"] = "exploded" }, ErrInvalid, "kind"},
		{"finished without result", "report", func(m map[string]any) { delete(m, "result") }, ErrInvalid, "result"},
		{"finished bad outcome", "report", func(m map[string]any) { m["outcome"] = "meh" }, ErrInvalid, "outcome"},
		{"huge result message", "report", func(m map[string]any) {
			m["result"] = map[string]any{"code": 1, "message": big[:MaxMessageLen+1]}
		}, ErrInvalid, "result.message"},
		{"started_at on triggered", "report", func(m map[string]any) {
			m["kind"] = "triggered"
			delete(m, "outcome")
			delete(m, "result")
			m["started_at"] = t0
		}, ErrInvalid, "started_at"},
		{"missing at", "report", func(m map[string]any) { delete(m, "at") }, ErrInvalid, "at"},
		{"negative retry_after", "report", func(m map[string]any) { m["retry_after"] = "-1s" }, ErrInvalid, "retry_after"},
		{"retry_after over a week", "report", func(m map[string]any) { m["retry_after"] = "169h" }, ErrInvalid, "retry_after"},
		{"retry_after on a permanent failure", "report", func(m map[string]any) { m["result"].(map[string]any)["retryable"] = false }, ErrInvalid, "retry_after"},
		{"retry_after on success", "report", func(m map[string]any) { m["outcome"] = "success" }, ErrInvalid, "retry_after"},
		{"retry_after on running", "report", func(m map[string]any) {
			m["kind"] = "running"
			delete(m, "outcome")
			delete(m, "result")
		}, ErrInvalid, "retry_after"},
		{"fenced without epoch", "report", func(m map[string]any) {
			m["kind"] = "fenced"
			delete(m, "outcome")
			delete(m, "result")
		}, ErrInvalid, "epoch"},
		{"skipped_count on finished", "report", func(m map[string]any) { m["skipped_count"] = 3 }, ErrInvalid, "skipped_count"},
		{"skipped_count of one", "report", func(m map[string]any) {
			m["kind"], m["skipped_count"], m["first_scheduled_at"] = "skipped", 1, t0
			delete(m, "outcome")
			delete(m, "result")
		}, ErrInvalid, "skipped_count"},
		{"skipped_count without first", "report", func(m map[string]any) {
			m["kind"], m["skipped_count"] = "skipped", 3
			delete(m, "outcome")
			delete(m, "result")
		}, ErrInvalid, "first_scheduled_at"},
		{"first_scheduled_at after scheduled_at", "report", func(m map[string]any) {
			m["kind"], m["skipped_count"], m["first_scheduled_at"] = "skipped", 3, sched.Add(time.Second)
			delete(m, "outcome")
			delete(m, "result")
		}, ErrInvalid, "first_scheduled_at"},
		{"first_scheduled_at alone", "report", func(m map[string]any) {
			m["kind"], m["first_scheduled_at"] = "skipped", t0
			delete(m, "outcome")
			delete(m, "result")
		}, ErrInvalid, "skipped_count"},
		{"fenced with outcome", "report", func(m map[string]any) { m["kind"], m["epoch"] = "fenced", 3 }, ErrInvalid, "outcome"},
		{"command two bodies", "cancel", func(m map[string]any) { m["unassign"] = map[string]any{"job_id": jobID} }, ErrInvalid, "kind"},
		{"command wrong body", "cancel", func(m map[string]any) { m["kind"] = "run" }, ErrInvalid, "run"},
		{"command unknown kind", "cancel", func(m map[string]any) { m["kind"] = "reboot" }, ErrInvalid, "kind"},
		{"assign bad job", "assign", func(m map[string]any) {
			m["assign"].(map[string]any)["job"].(map[string]any)["priority"] = 12
		}, ErrInvalid, "assign.job.priority"},
		{"assign no job id", "assign", func(m map[string]any) { delete(m["assign"].(map[string]any)["job"].(map[string]any), "id") }, ErrInvalid, "assign.job.id"},
		{"assign shard out of range", "assign", func(m map[string]any) { m["assign"].(map[string]any)["shard"] = map[string]any{"index": 3, "total": 3} }, ErrInvalid, "assign.shard"},
		{"run attempt", "run", func(m map[string]any) { m["run"].(map[string]any)["attempt"] = MaxAttempt + 1 }, ErrInvalid, "run.attempt"},
		{"run exec of other job", "run", func(m map[string]any) { m["run"].(map[string]any)["exec_id"] = ExecID(NewJobID("x", t0, 1), sched) }, ErrInvalid, "run.exec_id"},
		{"grant without ttl", "lease_grant", func(m map[string]any) { delete(m["lease"].(map[string]any), "ttl") }, ErrInvalid, "lease.ttl"},
		{"lease epoch 0", "lease_revoke", func(m map[string]any) { m["lease"].(map[string]any)["epoch"] = 0 }, ErrInvalid, "lease.epoch"},
		{"cancel bad exec", "cancel", func(m map[string]any) { m["cancel"].(map[string]any)["exec_id"] = "x" }, ErrInvalid, "cancel.exec_id"},
		{"register bad label", "register", func(m map[string]any) { m["labels"] = map[string]any{"site": "a b"} }, ErrInvalid, "labels.site"},
		{"register bad handler", "register", func(m map[string]any) { m["handlers"] = []any{"ok", "not ok"} }, ErrInvalid, "handlers"},
		{"register held lease epoch", "register", func(m map[string]any) { m["leases"] = []any{map[string]any{"job_id": jobID, "epoch": 0}} }, ErrInvalid, "leases[0].epoch"},
		{"register fresh with a cursor", "register", func(m map[string]any) { m["fresh"] = true }, ErrInvalid, "fresh"},
		{"register reply bad label", "register_reply", func(m map[string]any) { m["labels"] = map[string]any{"a b": "x"} }, ErrInvalid, "labels"},
		{"reply shards", "register_reply", func(m map[string]any) { m["shards"] = 0 }, ErrInvalid, "shards"},
		{"heartbeat negative", "heartbeat", func(m map[string]any) { m["stats"].(map[string]any)["pending"] = -1 }, ErrInvalid, "stats.pending"},
		{"heartbeat reply lease", "heartbeat_reply", func(m map[string]any) { m["renewed"] = []any{map[string]any{"job_id": jobID, "epoch": 1}} }, ErrInvalid, "renewed[0].ttl"},
		{"event bad state", "event", func(m map[string]any) { m["to"] = "DONE" }, ErrInvalid, "to"},
		{"event wrong type", "event", func(m map[string]any) { m["attempt"] = "one" }, ErrInvalid, "attempt"},
		{"event bad via", "event", func(m map[string]any) { m["via"] = []any{"TRIGGERED", "WALKING"} }, ErrInvalid, "via[1]"},
		{"event long via", "event", func(m map[string]any) {
			m["via"] = []any{"RUNNING", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "RUNNING"}
		}, ErrInvalid, "via"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeAny(tc.kind, mutate(t, tc.kind, tc.fn))
			wantField(t, err, tc.sentinel, tc.field)
		})
	}
}

func TestDecodeRejectsOversize(t *testing.T) {
	b := []byte(`{"v":2,"agent":"` + strings.Repeat("a", MaxMessageSize) + `"}`)
	for _, kind := range []string{"report", "register", "register_reply", "heartbeat", "heartbeat_reply", "event", "run"} {
		_, err := decodeAny(kind, b)
		wantField(t, err, ErrTooLarge, "")
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	if _, err := Encode(Report{V: Version}); err == nil {
		t.Fatal("Encode accepted an invalid report")
	}
}

func TestClockOffset(t *testing.T) {
	// Agent sends at 10:00:00.000 (its clock), receives at 10:00:00.100; the
	// controller stamped 10:00:05.050: the agent is 5 s behind.
	a0 := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	got := ClockOffset(a0, a0.Add(5050*time.Millisecond), a0.Add(100*time.Millisecond))
	if got != 5*time.Second {
		t.Fatalf("offset = %v, want 5s", got)
	}
}

func TestStates(t *testing.T) {
	terminal := map[State]bool{StateSuccess: true, StateFailed: true, StateCancelled: true, StateSkipped: true}
	for _, s := range States {
		if s.Terminal() != terminal[s] {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
		if !s.Valid() {
			t.Errorf("%s not valid", s)
		}
	}
	if State("DONE").Valid() {
		t.Error("unknown state valid")
	}
}

// TestCoalescedSkippedReport: a skipped report standing for several fires
// (skipped_count, first_scheduled_at) decodes, round-trips and counts its
// fires; a report without them stands for one.
func TestCoalescedSkippedReport(t *testing.T) {
	data, err := os.ReadFile("testdata/fuzz/FuzzDecodeReport/seed-report-skipped-count")
	if err != nil {
		t.Fatal(err)
	}
	line := strings.SplitN(string(data), "\n", 3)[1]
	raw, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "[]byte("), ")"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeReport([]byte(raw))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if r.Fires() != 1000 || !r.FirstScheduledAt.Equal(time.Date(2026, 11, 30, 0, 53, 20, 0, time.UTC)) {
		t.Fatalf("decoded %+v: want 1000 fires from 00:53:20", r)
	}
	b, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if r2, err := DecodeReport(b); err != nil || r2.SkippedCount != 1000 {
		t.Fatalf("round trip: %+v %v", r2, err)
	}
	if n := (Report{Kind: ReportSkipped}).Fires(); n != 1 {
		t.Fatalf("a plain skipped report stands for %d fires, want 1", n)
	}
}
