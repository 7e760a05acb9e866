package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/axsched/ax/agent"
)

// An embedding program registers its own Go handlers by name; jobs with
// `handler: sync-cache` then run this function on the agent.
func Example() {
	syncCache := func(ctx context.Context, t agent.Task) agent.Result {
		// Use t.ExecID as the unique key of any side effect: a re-run of the
		// same fire has the same id.
		if err := ctx.Err(); err != nil {
			return agent.Result{Code: 1, Message: err.Error(), Retryable: true}
		}
		return agent.Result{Code: 0, Message: "cache refreshed for " + t.JobID}
	}
	dir, err := os.MkdirTemp("", "ax-agent-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	cfg := agent.DefaultConfig()
	cfg.ID = "edge-7"
	cfg.DataDir = dir
	cfg.NATS.URL = "nats://127.0.0.1:4222"
	a, err := agent.New(cfg,
		agent.WithHandler("sync-cache", syncCache),
		agent.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Println(err)
		return
	}
	// a.Run(ctx) runs until ctx is done (SIGTERM in cmd/ax-agent).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fmt.Println(a.Run(ctx))
	// Output: <nil>
}
