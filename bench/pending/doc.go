// Command pending is a black-box benchmark of ax for issue 16: it starts
// the ax-controller binary (embedded NATS with nats.auth none, a temporary
// data dir, free loopback ports, JSON logs at info) and one real ax-agent
// (id bench-1, workers 8, exec.allow /bin/true), both as child processes,
// and measures them only through the HTTP API, /metrics, /proc, du, the
// controller's log and (soak) stream info over NATS.
//
// -mode pending (the default) measures pending delayed one-shots:
//
//  1. creates -n (300,000) one-shot jobs with delay: 30m (exec /bin/true,
//     pinned to bench-1) through POST /v1/jobs:batch (-batch 1000 per call,
//     -inflight 4 calls at a time), and counts per-job errors;
//  2. waits until the agent holds every run: its heartbeat's stats.pending,
//     which the agent counts from the PENDING rows of its SQLite
//     (agent/heartbeat.go, store.Counts), read from GET /v1/agents; it also
//     prints the controller's ax_commands_total{kind="run"};
//  3. records VmRSS/VmHWM of both processes and du of both data dirs;
//  4. times -gets (200) sequential GETs of /v1/jobs?limit=50,
//     /v1/executions?limit=50 and both filtered by agent (executions also by
//     state=PENDING), p50/p99/max;
//  5. waits -settle (default 0: at once), printing the controller's RSS
//     every 30 s meanwhile (2m30s puts the restarts past
//     AX_EVT's 2m de-duplication window, as a restart long after the creates
//     is), then restarts the controller on the same data dir, once with SIGTERM and
//     once with SIGKILL (-restart term,kill): time from process start to
//     the first 200 of /readyz (polled every 20 ms) and to the "executions
//     reloaded" log record (its time field; its pending and pending_resent
//     fields, summed over the records), RSS at ready and -after (30 s)
//     later, ax_shards_owned (before, after and its minimum from 2 s after
//     ready), ax_lease_takeovers_total and ax_lease_expiries_total before
//     and after, and the shard lease warnings of the new process's log;
//     with -steady (e.g. 3m), the RSS again that long after ready, past the
//     embedded server's per-block subject state (dropped 2 minutes after
//     the blocks were last used);
//  6. times the GETs again.
//
// It prints a summary table and exits 1 when a create failed or a restart
// re-sent a pending run (pending_resent > 0), 2 on an error.
//
// -mode soak runs -rate (500) executions/s for -duration (30m): -periodic
// (250) jobs with every: 1s and asap one-shots for the rest of the rate,
// submitted through the batch API in ten batches a second; the jobs GET an
// HTTP sink in this process (the http handler, no fork per run). The
// controller runs with history.retention = -retention (10m) and
// reports.dedup_window = -dedup-window (the live grace: with 10m a terminal
// execution leaves ax_execs 10m after it ended; empty, the default, for
// the controller's 10m; it applies to -mode pending too). Every
// -sample (30s) it prints elapsed time, controller RSS, the messages of
// KV_ax_jobs and KV_ax_execs (the keys of buckets ax_jobs and ax_execs) and
// of AX_EVT, the controller data dir size, executions done/s (SUCCESS,
// FAILED and SKIPPED of ax_executions_total) and sink hits/s in the window;
// with -parts, under each sample, the size of each stream's directory and
// of each file of the history index (du).
//
// Build and run from the repository root:
//
//	go build -o /tmp/ax-controller ./cmd/ax-controller
//	go build -o /tmp/ax-agent ./cmd/ax-agent
//	(cd bench && go build -o /tmp/bench-pending ./pending)
//	/tmp/bench-pending -controller /tmp/ax-controller -agent /tmp/ax-agent -n 300000
//	/tmp/bench-pending -mode soak -controller /tmp/ax-controller -agent /tmp/ax-agent -rate 500 -duration 30m -retention 10m -dedup-window 10m
//
// -keep keeps the temporary directory (data and the logs ctl-<n>.log,
// agent.log); it is kept anyway when the run fails.
package main
