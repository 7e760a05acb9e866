package protocol

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestWriteSeedCorpus regenerates testdata/fuzz from the sample messages
// when AX_WRITE_CORPUS=1; the files are committed so that plain `go test`
// replays them.
func TestWriteSeedCorpus(t *testing.T) {
	if os.Getenv("AX_WRITE_CORPUS") != "1" {
		t.Skip("set AX_WRITE_CORPUS=1 to regenerate testdata/fuzz")
	}
	write := func(fuzz, name string, data []byte) {
		dir := filepath.Join("testdata", "fuzz", fuzz)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\n", strconv.Quote(string(data)))
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fuzzOf := map[string]string{"report": "FuzzDecodeReport", "register": "FuzzDecodeRegister", "register_reply": "FuzzDecodeRegisterReply",
		"heartbeat": "FuzzDecodeHeartbeat", "heartbeat_reply": "FuzzDecodeHeartbeatReply", "event": "FuzzDecodeEvent",
		"job_retired": "FuzzDecodeJobRetired"}
	for kind, m := range sampleMessages() {
		b, _ := json.Marshal(m)
		fz, ok := fuzzOf[kind]
		if !ok {
			fz = "FuzzDecodeCommand"
		}
		write(fz, "seed-"+kind, b)
		write(fz, "seed-"+kind+"-truncated", b[:len(b)/2])
	}
	write("FuzzDecodeJob", "seed-valid", mustJSON(t, validJob()))
	write("FuzzDecodeJob", "seed-unknown-field", []byte(`{"name":"n","handler":"exec","schedule":{"every":"5m"},"target":{"agent":"a"},"x":1}`))
	dir := filepath.Join("testdata", "fuzz", "FuzzParseExecID")
	_ = os.MkdirAll(dir, 0o755)
	for i, id := range []string{ExecID(jobID, sched), BroadcastExecID(jobID, sched, 2), jobID + "-", "ax-a_b-20260101000000-aaaaaa-1_3"} {
		body := fmt.Sprintf("go test fuzz v1\nstring(%s)\n", strconv.Quote(id))
		_ = os.WriteFile(filepath.Join(dir, "seed-"+strconv.Itoa(i)), []byte(body), 0o644)
	}
}
