package cli

import (
	"context"
	"testing"

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
