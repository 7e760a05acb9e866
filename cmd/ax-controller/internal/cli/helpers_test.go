package cli

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/internal/apitest"
	"github.com/axsched/ax/internal/testutil"
)

// syncBuf is a concurrency-safe output sink.
type syncBuf = testutil.Buffer

// run executes one command line in-process.
func run(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errb syncBuf
	code = Main(ctx, args, IO{Out: &out, Err: &errb}, Build{Version: "1.2.3", Commit: "abc123", Date: "2026-11-29"})
	return code, out.String(), errb.String()
}

// apiServer runs a real controller behind the API handler and returns its URL.
func apiServer(t *testing.T, tokens ...api.Token) string {
	t.Helper()
	srv, _ := apitest.Serve(t, apitest.Config(t), tokens...)
	return srv.URL
}

// serveListening runs Main with args (a serve command with a JSON log)
// until ctx ends, and waits up to 30 s for its "api listening" line. It
// returns the API address, Main's exit code (sent when it returns) and
// its stderr.
func serveListening(ctx context.Context, t *testing.T, args ...string) (addr string, done <-chan int, errb *syncBuf) {
	t.Helper()
	var out syncBuf
	errb = &syncBuf{}
	exit := make(chan int, 1)
	go func() { exit <- Main(ctx, args, IO{Out: &out, Err: errb}, Build{Version: "t"}) }()
	addrRe := regexp.MustCompile(`"msg":"api listening","addr":"([^"]+)"`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := addrRe.FindStringSubmatch(errb.String()); m != nil {
			return m[1], exit, errb
		}
		select {
		case code := <-exit:
			t.Fatalf("serve exited %d: %s", code, errb.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not log its address: %s", errb.String())
		}
	}
}
