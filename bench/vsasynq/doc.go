// Command vsasynq runs ax and asynq + Redis side by side on this machine,
// black-box, with the same workloads, and prints the figures and their
// ratios:
//
//   - dispatch: N one-shot tasks submitted by 8 clients as fast as they
//     go; each handler makes one HTTP GET to a local no-op server (the
//     sink); 8 workers each. Throughput is N over the time from the first
//     submit to the last outcome recorded by the scheduler (ax: the
//     controller's ax_executions_total{state="SUCCESS"}; asynq: the
//     queue's processed count).
//   - latency: tasks submitted at a fixed pace; submit → handler start
//     latency as the sink sees it (the submit time travels in the URL).
//   - periodic: J jobs firing every second (ax `every: 1s` jobs pinned to
//     the agent; asynq's Scheduler with "@every 1s" entries) for a window
//     after a warm-up; handler runs per second.
//
// CPU is the user+system time of the scheduler's own processes over the
// measured span, read from /proc (ax: ax-controller with its embedded NATS
// server, and ax-agent; asynq: redis-server and the worker process). The
// submitting clients and the sink run in this process for both and are
// not counted.
//
// Every repetition starts fresh processes and data directories; the two
// systems alternate in each repetition and the order flips between
// repetitions. Redis runs with AOF on (appendfsync everysec) and no RDB
// snapshots; ax with its defaults (SQLite synchronous=FULL on the agent,
// JetStream file storage). bench/run.sh builds the ax binaries, installs
// redis-server when it is missing and runs this command.
package main
