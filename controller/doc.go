// Package controller is the core of ax-controller (DESIGN §3, §4, §6): it
// runs (or connects to) NATS JetStream, keeps jobs and executions in KV,
// owns the execution state machine and the retry backoff, answers agent
// registrations and heartbeats, and sends agents their commands.
//
// # Lifecycle
//
// New checks the Config; Start runs the embedded nats-server (JetStream file
// store under DataDir, client port on 127.0.0.1) unless NATS.URL names an
// external server, ensures the streams and buckets (internal/streams), loads
// jobs and agents, reloads retry timers from KV, and starts one report
// consumer per shard plus the registration and heartbeat responders. Close
// stops everything, the embedded server included. A nil Config.Logger
// discards logs; a nil Config.Registry gets a fresh prometheus registry.
//
// # Jobs
//
// Jobs live in KV ax_jobs (key: job id). CreateJob validates (errors are
// *protocol.FieldError naming the field; nothing is written), sets id,
// created_at and generation 1, and claims the idempotency key with KV Create
// on ax_idem (key: hex sha256 of the key): a taken key returns *ExistsError
// with the existing job's id. Periodic jobs (every, cron) are assigned to
// agents with assign commands (pinned: the agent; mode all: every matching
// agent with its shard slot; mode any: one agent by rendezvous hashing,
// epoch 0); one-shot jobs (asap, at, delay) and TriggerJob create a PENDING
// execution and a run command. Updates bump the generation and reach the
// agents; deletes send unassign.
//
// # Executions
//
// Executions live in KV ax_execs (key: exec id). statemachine.go holds the
// allowed transitions of DESIGN §3 in one table. Reports arrive on AX_RPT,
// one durable pull consumer per shard (ax-shard-<n>; with fewer shards
// configured than protocol.DefaultShards, the shard subjects up to
// DefaultShards get consumers too, because an agent reports there before
// its first registration). Each report is applied once, idempotent by
// (exec_id, attempt, kind) through the applied-step markers kept in the
// record, with compare-and-set on the KV revision, and acknowledged only
// after the write and its events are stored. A shard's reports are spread
// over lanes by exec id; a lane applies them in batches (lanes.go): the
// reports of one execution in a batch become one write, the writes of a
// batch are asynchronous compare-and-set publishes awaited together, and a
// lost compare-and-set is redone for that execution alone.
//
// A finished (or interrupted) report with triggered_at and started_at, or a
// running report with triggered_at, stands for the earlier steps of its
// attempt: the controller applies TRIGGERED → RUNNING → final (with the
// retry decision) in one write, publishes one event per step and counts
// each step in ax_reports_applied_total; steps already applied by earlier
// reports are skipped, and a later stray triggered or running report of the
// attempt is a duplicate. Stale reports (older attempt or epoch, terminal
// execution) and refused transitions are logged with the reason and
// counted. A report ahead of its record (running before triggered, which
// happens when a crashed controller's unacknowledged reports are redelivered
// after newer ones) is not dropped but redelivered later, for up to three
// ack waits (at least a minute). Every transition publishes a
// protocol.Event on ax.evt.<STATE>.<job_id> with Msg-Id
// evt/<exec_id>/<attempt>/<STATE>. A duplicate report publishes the events
// of the steps it made again (from the markers): AX_EVT drops them within
// its de-duplication window, and an event lost to a crash between the KV
// write and the event is restored; a plain NATS subscriber may see such an
// event twice, a stream consumer does not.
//
// A retryable failure with attempts left moves to RETRY_WAITING with
// next_attempt_at; the retry wheel (pkg/wheel) then sends the run command of
// the next attempt, and the execution moves to TRIGGERED when the agent
// reports it. Retry timers are reloaded from KV at start, so a restart
// sends the run command of every RETRY_WAITING execution again (overdue
// ones at once; same Msg-Id run/<exec_id>/<attempt>, so the stream drops a
// copy it still holds). One whose run was sent but is never reported stays
// RETRY_WAITING until then (agent leases will bound it).
//
// # Metrics
//
// Registered on Config.Registry; names are stable:
//
//	ax_executions_total{state}        counter   transitions into each state
//	ax_schedule_lag_seconds           histogram lag of attempts (running reports)
//	ax_execution_duration_seconds     histogram run time of finished attempts
//	ax_retries_pending                gauge     executions waiting on the retry wheel
//	ax_agents_online                  gauge     agents heard from within agent_offline_after
//	ax_agents_known                   gauge     registered agents, online or not (revoked excluded)
//	ax_agent_outbox_depth{agent}      gauge     reports waiting in the agent's outbox, as of its
//	                                            last heartbeat (it cannot deliver them yet)
//	ax_agent_queue_depth{agent}       gauge     triggered executions waiting for a worker on the
//	                                            agent, as of its last heartbeat
//	ax_agent_running{agent}           gauge     attempts running on the agent, as of its last heartbeat
//	ax_reports_applied_total          counter   report steps applied (a coalesced report counts each step)
//	ax_reports_rejected_total{reason} counter   reports not applied: invalid, duplicate,
//	                                            old_attempt, old_epoch, terminal,
//	                                            unknown_exec, future_attempt, transition
//	ax_reports_deferred_total         counter   reports ahead of their execution (an earlier
//	                                            step not arrived yet, e.g. redelivered after a
//	                                            controller crash), redelivered later
//	ax_commands_total{kind}           counter   commands published to agents
//
// The ax_agent_* gauges are set on every heartbeat (and at start from the
// stats stored with each agent's last heartbeat) and deleted when the
// agent is revoked (RevokeAgent). Controller replicas share the heartbeats
// (one queue group): each replica's gauges are as of the last heartbeat it
// answered.
//
// # Logs
//
// Per execution the controller logs "execution created" (PENDING) or
// "execution triggered", "execution running" (with lag), and "execution
// finished" (state, outcome, duration) or "execution retry scheduled"; one
// line per rejected report with its reason.
package controller
