package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"
)

// fuzzDecoder checks that a decoder never panics, and that whatever it
// accepts encodes again and decodes to the same message.
func fuzzDecoder[M interface{ Validate() error }](f *testing.F, kind string, decode func([]byte) (M, error)) {
	for k, m := range sampleMessages() {
		if k == kind || (kind == "command" && isCommand(m)) {
			b, _ := json.Marshal(m)
			f.Add(b)
		}
	}
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`{"v":99}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decode(data)
		if err != nil {
			return
		}
		b, err := Encode(m)
		if err != nil {
			t.Fatalf("accepted message does not encode: %v (%s)", err, data)
		}
		m2, err := decode(b)
		if err != nil {
			t.Fatalf("re-encoded message rejected: %v (%s)", err, b)
		}
		if !reflect.DeepEqual(reflectValue(m), reflectValue(m2)) {
			t.Fatalf("round trip changed the message: %s vs %s", mustJSON(t, m), mustJSON(t, m2))
		}
	})
}

func isCommand(m any) bool { _, ok := m.(Command); return ok }

func FuzzDecodeCommand(f *testing.F)   { fuzzDecoder(f, "command", DecodeCommand) }
func FuzzDecodeReport(f *testing.F)    { fuzzDecoder(f, "report", DecodeReport) }
func FuzzDecodeRegister(f *testing.F)  { fuzzDecoder(f, "register", DecodeRegister) }
func FuzzDecodeHeartbeat(f *testing.F) { fuzzDecoder(f, "heartbeat", DecodeHeartbeat) }
func FuzzDecodeEvent(f *testing.F)     { fuzzDecoder(f, "event", DecodeEvent) }

// FuzzDecodeJobRetired: the retirement record the history index reads.
func FuzzDecodeJobRetired(f *testing.F) { fuzzDecoder(f, "job_retired", DecodeJobRetired) }
func FuzzDecodeRegisterReply(f *testing.F) {
	fuzzDecoder(f, "register_reply", DecodeRegisterReply)
}
func FuzzDecodeHeartbeatReply(f *testing.F) {
	fuzzDecoder(f, "heartbeat_reply", DecodeHeartbeatReply)
}

func FuzzDecodeJob(f *testing.F) {
	f.Add(mustJSON(f, validJob()))
	f.Add([]byte(`{"name":"n","handler":"exec","schedule":{"cron":"0 2 * * *","timezone":"Europe/Berlin"},"target":{"group":"site=a","mode":"all"}}`))
	f.Add([]byte("{\"name\":\"n\xff\",\"handler\":\"exec\",\"schedule\":{\"every\":\"1m\"},\"target\":{\"agent\":\"a\"}}"))
	f.Add([]byte(`{"name":"n","idempotency_key":"\ud800","handler":"exec","schedule":{"every":"1m"},"target":{"agent":"a"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := DecodeJob(data)
		if err != nil {
			return
		}
		if !utf8.Valid(data) {
			// It would have reached the job as U+FFFD.
			t.Fatalf("job with invalid UTF-8 accepted: %q", data)
		}
		j2, err := DecodeJob(mustJSON(t, j))
		if err != nil {
			t.Fatalf("re-encoded job rejected: %v", err)
		}
		if !reflect.DeepEqual(reflectValue(j), reflectValue(j2)) {
			t.Fatalf("round trip changed the job")
		}
	})
}

func FuzzParseExecID(f *testing.F) {
	f.Add(ExecID(jobID, sched))
	f.Add(BroadcastExecID(jobID, sched, 3))
	f.Add("ax-a-20260101000000-aaaaaa-1_")
	f.Fuzz(func(t *testing.T, id string) {
		job, at, err := ParseExecID("exec_id", id)
		if err != nil {
			return
		}
		if ValidateJobID("id", job) != nil {
			t.Fatalf("ParseExecID(%q) returned invalid job id %q", id, job)
		}
		if at.UnixMilli() < 0 {
			t.Fatalf("negative time from %q", id)
		}
	})
}

func FuzzDecodeLabelChange(f *testing.F) {
	f.Add([]byte(`{"set":{"site":"plant-3"},"remove":["role"]}`))
	f.Add([]byte(`{"remove":["a","a"]}`))
	f.Add([]byte("{\"set\":{\"a\":\"b\xff\"}}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeLabelChange(data)
		if err != nil {
			return
		}
		if !utf8.Valid(data) {
			t.Fatalf("label change with invalid UTF-8 accepted: %q", data)
		}
		c2, err := DecodeLabelChange(mustJSON(t, c))
		if err != nil {
			t.Fatalf("re-encoded label change rejected: %v", err)
		}
		if !reflect.DeepEqual(c.Apply(nil), c2.Apply(nil)) {
			t.Fatalf("round trip changed the change: %v vs %v", c, c2)
		}
	})
}
