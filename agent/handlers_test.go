package agent

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestBuiltinHandlerNamesReserved: exec and http are registered from the
// config like any handler, and a program's handler may not take their
// names; the error names the field.
func TestBuiltinHandlerNamesReserved(t *testing.T) {
	for _, name := range []string{"exec", "http"} {
		cfg := testConfig(t, "edge-n", "nats://127.0.0.1:1")
		_, err := New(cfg, WithLogger(testLogger(t)), WithHandler(name, func(context.Context, Task) Result { return Result{} }))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "handler") {
			t.Fatalf("WithHandler(%q): err = %v, want ErrConfig naming handler", name, err)
		}
	}
	a := newStopped(t, testConfig(t, "edge-n", "nats://127.0.0.1:1"),
		WithHandler("noop", func(context.Context, Task) Result { return Result{} }))
	if got := strings.Join(a.names, ","); got != "exec,http,noop" {
		t.Fatalf("registered handlers %q, want exec,http,noop", got)
	}
}
