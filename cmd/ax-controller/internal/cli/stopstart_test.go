package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeStoppedBeforeReadyExitsOK: a controller stopped (SIGTERM,
// SIGINT: its context cancelled) while it starts exits 0 with a line
// saying so, as a stop after ready does, not 1 with "start controller: …
// context canceled" as if it had failed to start.
func TestServeStoppedBeforeReadyExitsOK(t *testing.T) {
	cfg := writeFile(t, "c.yaml", "data_dir: "+filepath.Join(t.TempDir(), "ctl")+"\nlog:\n  format: json\n"+
		"nats:\n  port: -1\napi:\n  listen: 127.0.0.1:0\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the signal came before the start's first request
	var out, errb syncBuf
	code := Main(ctx, []string{"serve", "--config", cfg}, IO{Out: &out, Err: &errb}, Build{Version: "t"})
	if code != ExitOK {
		t.Fatalf("serve stopped before ready exited %d, want %d: %s", code, ExitOK, errb.String())
	}
	if !strings.Contains(errb.String(), `"msg":"stopped before ready"`) {
		t.Fatalf("serve stopped before ready did not say so: %s", errb.String())
	}
}
