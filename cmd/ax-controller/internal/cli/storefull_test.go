package cli

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/testutil"
)

// TestServeExitsWhenStoreFull: serve on a data dir whose disk fills up
// (a real tmpfs of 64 MiB: the test needs Linux, root and mount, and
// skips without them) stops by itself with exit code 1 and an error that
// says the store cannot be written, so that systemd's Restart=always
// starts it again (controller/storefailed.go), instead of answering the
// API while its writes time out.
func TestServeExitsWhenStoreFull(t *testing.T) {
	disk := testutil.SmallDisk(t, "64m")
	cfg := writeFile(t, "c.yaml", "data_dir: "+filepath.Join(disk, "ctl")+"\nlog:\n  format: json\n"+
		"nats:\n  port: -1\napi:\n  listen: 127.0.0.1:0\nreports:\n  max_bytes: 4194304\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, done, errb := serveListening(ctx, t, "serve", "--config", cfg)

	testutil.FillDisk(t, filepath.Join(disk, "filler"))
	// A create writes at once (lease renewals would, within seconds).
	go func() {
		body := `{"name":"x","handler":"noop","schedule":{"delay":"1h"},"target":{"agent":"edge-1"}}`
		cl := &http.Client{Timeout: 10 * time.Second}
		if resp, err := cl.Post("http://"+addr+"/v1/jobs", "application/json", strings.NewReader(body)); err == nil {
			_ = resp.Body.Close()
		}
	}()
	select {
	case code := <-done:
		if code != ExitError {
			t.Fatalf("serve exited %d, want %d: %s", code, ExitError, errb.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve still running 60 s after its disk filled: %s", errb.String())
	}
	if !strings.Contains(errb.String(), "cannot write its store") || !strings.Contains(errb.String(), "no space left on device") {
		t.Fatalf("serve's error does not say the store is full: %s", errb.String())
	}
}
