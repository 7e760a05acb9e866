// Package controller is the core of ax-controller (docs/architecture.md): it
// runs (or connects to) NATS JetStream, keeps jobs and executions in KV,
// owns the execution state machine and the retry backoff, answers agent
// registrations and heartbeats, and sends agents their commands.
//
// # Lifecycle
//
// New checks the Config; Start runs the embedded nats-server (JetStream file
// store under DataDir, client port on 127.0.0.1) unless NATS.URL names an
// external server, ensures the streams and buckets (internal/streams) and
// the per-shard report consumers, follows jobs, agents and leases in KV,
// starts the registration and heartbeat responders, and takes its shards
// (see Replicas and leases; a lone replica holds all of them when Start
// returns). A shard's report worker starts, and its executions are
// reloaded, when this replica acquires the shard's lease. Close releases
// the shards, then stops everything, the embedded server included (a
// failed controller skips the writes: see Store failure). A nil
// Config.Logger discards logs; a nil Config.Registry gets a fresh
// prometheus registry.
//
// # Parts
//
// Controller's methods are the API (what controller/api's Backend,
// Enroller and Labeler ask for) and the lifecycle; each checks its
// request and enters the part that does the work. The parts (parts.go)
// share one core: the configuration, the stores and caches, the fleet,
// ownership, group-lease, ingest, placement and retention components,
// and the lifecycle (start, shutdown, the goroutine and loop runners). A
// call from one part into another names the part (c.ex.applyExec,
// c.ex.createRuns):
//
//	jobService    jobs and their idempotency keys, the one-shot fast path,
//	              the commands of a stored change (onJobChanged through the
//	              driver, dispatchChange on the owner of the job's shard)
//	execService   the one execution.Apply, its effects, the execution store,
//	              the retry timers that fire (retries.go), the executions
//	              of a fire (createRuns, dispatch.go)
//	reloader      a shard's live executions, reloaded at acquisition
//	agentService  what the fleet and group leases ask (lost epochs, store loss)
//
// The fleet (package fleet), ownership (lease.Ownership), group-lease
// (lease.GroupLeases), report ingest (package ingest), placement
// (package placement) and retention (package retention) components reach
// the parts through their host interfaces (fleet.Host,
// lease.OwnershipHost, lease.GroupLeaseHost, ingest.Host, placement.Host,
// retention.Host), which small adapters in parts.go answer.
//
// # Placement
//
// Where a job's work goes is package placement (controller/placement,
// its doc names its files): the desired assignments of a periodic job
// and the assign and unassign diffs sent to agents when a job changes
// (AssignChange, from the jobService's onJobChanged and the one-shot
// fast path) or an agent's record does (ReconcileAgent, for the fleet),
// the agent of each execution of a fire (Placements, which the
// execService's createRuns and the one-shot fast path make executions
// from), and the PENDING executions waiting for an agent of their group
// (NoteWaiting and ForgetWaiting from the effects and the reload,
// PlaceUnplaced for the fleet, PlaceWaiting once a pass of the ownership
// loop). What it asks of the rest of the controller is placement.Host
// (placementHostOf, parts.go): publish a command, apply an event to an
// execution and carry out its effects, cancel the run of a deleted job
// (deletedruns.go). Everything else it gets at construction
// (placement.New: placement.Env with placement.Config, the logger, the
// clock, the assign lock, the job cache, the agent registry, the
// write-mark tracker). The assign lock is core.assignMu, given to the
// placement and to the fleet: an agent's lock before it, and the
// placement calls its host with it held. Making the executions of a fire
// stays the execService's (createRuns): it reads the history index and
// writes ax_execs, and asks the placement only where each execution
// goes.
//
// # Job changes: the driver
//
// The commands of a stored job change come from the replica that works
// the job's shard (package driver, controller/driver): onJobChanged hands
// the change to the driver's Drive, which calls the jobService's
// dispatchChange here when this replica owns the shard (or no owner is
// known), and otherwise asks the owner on ax.ctl.drive.<instance>, whose
// driver calls its dispatchChange and replies; with no owner taking it,
// this replica sends the commands itself. CreateJob's one-shot fast path
// (job and executions written together) is taken only where the driver
// would send locally (Local); elsewhere the job alone is written and the
// owner makes its executions. What the driver asks of the controller is
// driver.Host (driverHostOf, parts.go); Start runs its Serve.
//
// # Reports: the ingest
//
// Reports in are package ingest (controller/ingest, its doc names its
// files): the per-shard report consumers on AX_RPT and their workers and
// lanes, report authorization, the records CreateJob has just written or
// holds (kept for the first report's lane: NoteCreated; createheld.go), and the report
// stream's upkeep. What it asks of the rest of the controller is
// ingest.Host (ingestHostOf, parts.go): read a job from ax_jobs, the
// execution.Env of a job's executions, whether an execution left live
// state for the history, the effects (events, retry timers) of an
// applied report, and the publish of a stray job's unassign. Everything else it gets at construction (ingest.New:
// ingest.Env with ingest.Config, ingest.Metrics, the logger, clocks, the
// loop runner, the job cache, the group leases and the ownership) and at
// start (Attach: context, connection, the execution store). The
// ownership starts a shard's worker through ownershipHostOf
// (ingest.StartShardWorker); Start runs EnsureConsumers (a changed shard
// count is a config error of key shards) and ReportStreamLoop.
//
// # Agents: the fleet
//
// The agents' side is package fleet (controller/fleet, its doc names its
// files): registrations and heartbeats (worker pools behind one queue
// group of the replicas), liveness in memory with its writers and the
// per-replica digests in ax_liveness, the registry that mirrors ax_agents
// (fleet.Registry), enrollment and revocation, labels and the agents
// list; it makes every write of ax_agents and ax_liveness. What it asks
// of the rest of the controller is fleet.Host (fleetHostOf, parts.go):
// reconcile an agent's assignments after its record changed, place the
// PENDING runs that wait for a member of its groups (both the
// placement's: ReconcileAgent, PlaceUnplaced), the last command
// sent to it and the re-send of its runs after a store loss
// (storeloss.go), and the renewal and release of its group leases in a
// heartbeat. The command cursor an agent's heartbeats report reaches its
// record in ax_agents with the record's next write; the controller's
// pruner (cmdprune.go) reads it from the registry (StoredCursors) and
// removes the commands the agent applied from AX_CMD.
// Everything else it gets at construction (fleet.New:
// fleet.Env with fleet.Config, fleet.Metrics, the logger, clocks,
// goroutine and loop runners, the assignment lock) and at start (Attach:
// context, connection, buckets). The rest of the controller reads the
// registry (core.agents; the placement is given it in placement.Env) to
// place jobs and never writes it; ListAgents,
// ListAgentPage (agentlist.go), LabelAgent, EnrollAgent and RevokeAgent
// (fleet.go) check the request and delegate to the fleet, whose errors
// match the controller's sentinels (errors.go).
//
// # Configuration
//
// Config starts from DefaultConfig; Validate names the key of a bad value
// as ax-controller's YAML spells it ("lease_ttl: ..."). Besides the node
// name, data directory and NATS settings:
//
//	Node                must be unique per replica (it names the replica in ax_leases
//	                    and is written into job ids)
//	Shards              report shards, default 16; fixed once AX_RPT recorded it
//	                    (Start refuses another count); the same on every replica
//	HeartbeatInterval   told to agents, default 5s
//	AgentOfflineAfter   default 3×HeartbeatInterval
//	LeaseTTL            TTL of shard and group-job leases (the bucket TTL of
//	                    ax_leases), default 15s, 500ms..1h, at least 2×HeartbeatInterval
//	LeaseRenewInterval  how often a replica renews its presence and shard leases,
//	                    default LeaseTTL/3, at most LeaseTTL/2
//	AckWait             how long a report may stay unacknowledged before it is
//	                    redelivered (to the shard's next owner), default 30s, 1s..1h
//	Reports             bounds of AX_RPT (reports.max_bytes, default 1 GiB, at least
//	                    1 MiB; reports.max_age, default 7d, at least 1h); when full,
//	                    new reports are refused and agents keep them in their outbox
//	History.Retention   history.retention: how long ended executions and retired
//	                    one-shot jobs stay in the history index, default 7d, 1m..7d
//	NATS.URL            an external server or cluster (comma-separated URLs);
//	                    empty runs an embedded server
//	NATS.Replicas       replicas of streams and buckets: 1, 3 or 5 (3 and 5 need NATS.URL)
//
// # Jobs
//
// Jobs live in KV ax_jobs (key: job id). CreateJob validates (errors are
// *protocol.FieldError naming the field; nothing is written), sets id,
// created_at and generation 1, and claims the idempotency key with KV Create
// on ax_idem (key: hex sha256 of the key): a taken key returns *ExistsError
// with the existing job's id. Periodic jobs (every, cron) are assigned to
// agents with assign commands (pinned: the agent; mode all: every matching
// agent with its shard slot; mode any: the holder of the job's group lease,
// with its epoch, see Replicas and leases); one-shot jobs (asap, at, delay) and TriggerJob create a PENDING
// execution and a run command. Updates bump the generation and reach the
// agents; deletes send unassign.
//
// # Executions
//
// Live executions are in KV ax_execs (key: exec id); ended ones leave it
// after a grace period for the history (see History and retention).
// Package execution (controller/execution) is their state machine: the
// record, the one table of allowed transitions (docs/architecture.md: State machine), and Apply,
// through which every change of an execution is decided (a run created,
// each report, a retry due, an operator's retry or cancel, an agent lost,
// a job deleted, an expiry); the controller stores its result with
// compare-and-set and executes its effects (execapply.go). Reports arrive on AX_RPT,
// one durable pull consumer per shard (ax-shard-<n>; with fewer shards
// configured than protocol.DefaultShards, the shard subjects up to
// DefaultShards get consumers too, because an agent reports there before
// its first registration). The consumers keep their state in memory (a
// work queue's acknowledged reports leave the stream, so a consumer made
// again after a restart of the server delivers what is left), and AX_RPT's
// metadata records the shard count they were made for. Each report is applied once, idempotent by
// (exec_id, attempt, kind) through the applied-step markers kept in the
// record, with compare-and-set on the KV revision, and acknowledged only
// after the write and its events are stored. A shard's reports are spread
// over lanes by exec id; a lane applies them in batches (ingest/lanes.go): the
// reports of one execution in a batch become one write, the writes of a
// batch are asynchronous compare-and-set publishes awaited together, and a
// lost compare-and-set is redone for that execution alone. Reports that
// only move an execution of a one-shot job to TRIGGERED or RUNNING are
// held back up to 100ms for its later reports (ingest/lanelinger.go).
//
// A finished (or interrupted) report with triggered_at and started_at, or a
// running report with triggered_at, stands for the earlier steps of its
// attempt: the controller applies TRIGGERED → RUNNING → final (with the
// retry decision) in one write, publishes one event for them (to the final
// state, via TRIGGERED and RUNNING: protocol.Event.Via) and counts
// each step in ax_reports_applied_total; steps already applied by earlier
// reports are skipped, and a later stray triggered or running report of the
// attempt is a duplicate. Stale reports (older attempt or epoch, terminal
// execution) and refused transitions are logged with the reason and
// counted. A report ahead of its record (running before triggered, which
// happens when a crashed controller's unacknowledged reports are redelivered
// after newer ones) is not dropped but redelivered later, for up to three
// ack waits (at least a minute). Every stored change publishes one
// protocol.Event (but for a one-shot create's PENDING event, held about a
// second and dropped when the execution moves on by then: eventhold.go; a
// pinned one-shot due at once has its record held with it: createheld.go)
// on ax.evt.<STATE>.<job_id> (stored on ax.evt.<STATE>.<partition>:
// protocol.EventStoredSource) with Msg-Id
// evt/<exec_id>/<attempt>/<STATE> (STATE: the state it reached; a
// create's PENDING event, which has one publisher, carries that id in
// protocol.EventIDHeader instead, so the server keeps no de-duplication
// entry for it: publishEvent). A
// duplicate report publishes the events of the reports that first applied
// its steps again, the same ones (from the markers: Applied, Path and Ends
// of execution.Record): AX_EVT drops them within
// its de-duplication window (twice ack_wait, at least 2m, at most
// reports.dedup_window: controllerDedupWindow), and an event lost to a crash
// between the KV write and the event is restored; a plain NATS subscriber
// may see such an event twice, and so may a stream consumer when the
// report is redelivered after that window (a controller killed between
// storing the event and acknowledging the report, back later than the
// window). The history index keeps an execution's newest snapshot, so an
// event stored twice changes nothing there.
//
// A retryable failure with attempts left moves to RETRY_WAITING with
// next_attempt_at; the retry wheel (pkg/wheel) then sends the run command of
// the next attempt, and the execution moves to TRIGGERED when the agent
// reports it. Retry timers are reloaded from KV when a replica acquires a
// shard (at start, or when it takes the shard over; read by key from the
// executions the history index holds RETRY_WAITING when the index stands
// in for the scan of ax_execs, reloadindex.go), except those of
// executions whose next attempt's run was sent (Sent) and is in AX_CMD
// (reload.go's armSentRetries, from the commands sentruns.go reads): AX_CMD
// keeps the server's least duplicate window (streams.CommandDuplicates),
// and a copy would run again on an agent that had run the attempt and
// pruned it since. A run that was sent and is not there is sent again
// (overdue: at once; same Msg-Id run/<exec_id>/<attempt>/<agent>[/<epoch>]).
// The reload runs while the shard's lanes already
// apply reports, so it may read a record one attempt behind: a timer is
// never replaced by an earlier attempt's (retries.go). One whose run was sent but is never reported stays
// RETRY_WAITING until then, except for group jobs: a retry sent under an
// earlier epoch counts as lost when the lease is granted again, and one an
// agent drops unrun is reported fenced.
//
// # History and retention
//
// history.go: every replica keeps a SQLite index (package histindex) of
// every execution (and of retired one-shot jobs) in DataDir/history.db,
// fed from AX_EVT by an ordered consumer; each event carries the
// execution's snapshot (protocol.Event.Execution), and the stream
// sequence is stored in the transaction of the rows it applied, so the
// index resumes exactly and a
// deleted file is rebuilt from the stream. ListExecutions (filters job,
// agent, state, scheduled range From/To; paged by exec id) and ListJobs
// with Retired read it; GetExecution reads ax_execs first and the index
// for an execution that left live state. The index lags AX_EVT by the
// follower's batch (milliseconds); a list waits, at most 2s, for the
// events stored when it began, and the API's own writes wait for their
// event's ack, so a caller sees its own changes. A record written just
// before a crash may lack its event; a replica acquiring shards compares
// their live records with the index (once it holds every stored event)
// and publishes the missing events under their usual Msg-Ids
// (historyrepair.go).
//
// Retention is package retention (controller/retention, its doc has the
// design): the owner of a shard removes, once a minute, the terminal
// executions of its jobs whose last change is the live grace
// (reports.dedup_window, default 10m: the duplicate window of AX_RPT) old — a compare-and-set purge of the key, then a
// purge of its subject — and retires one-shot jobs all of whose
// executions left (protocol.JobRetired on AX_EVT, then the same purge of
// the job and its idempotency key). Every replica drops index rows
// history.retention after they left live state. A report for an
// execution without a record that the index holds is refused as a
// duplicate; createRuns and the
// reload of one-shot jobs never make such an execution again. An
// explicit sweeper rather than KV per-message TTLs: the removal of a job
// is a condition (all its executions left), a TTL would have to be set by
// every terminal write and cleared by an operator's retry, and the grace
// runs on Config.Clock. What it asks of the rest of the controller is
// retention.Host (retentionHostOf, parts.go): read a job from ax_jobs
// (the jobService's readJob) and whether the index holds every stored
// event (history.go's upToDate). Everything else it gets at construction
// (retention.New: retention.Env with retention.Config — the live grace,
// history.retention, the sweep's interval and batch —, the logger,
// clocks, the loop runner, the job cache, the ownership) and at start
// (Attach: the JetStream context, ax_idem, the execution store, the
// history index); Start runs its Loop. The live grace (liveGrace) and
// the de-duplication window of AX_EVT (controllerDedupWindow)
// stay the controller's configuration (config.go): Start sets the
// streams with them; the refusal of a report of an execution that left
// live state (inHistory) is the execService's (history.go), asked by the
// ingest.
//
// # Replicas and leases
//
// Several controllers (replicas) can run against one NATS server or
// cluster; they share every stream and bucket. KV ax_leases (bucket TTL =
// LeaseTTL, History 1) holds replica.<node> (presence), shard.<n> (the
// replica that works shard n) and job.<job id> (the agent that fires a
// group job, with its epoch); package lease has the keys, the values, the
// view of the bucket every replica keeps and the shard ownership. The live
// replicas, sorted by node name, split the shards round robin; a replica
// works a shard — consumes its reports, owns its retry timers and the
// leases of its group jobs — only while it holds shard.<n>, renewed every
// LeaseRenewInterval by compare-and-set (lease.Ownership). A replica that
// stops renewing loses its shards once LeaseTTL has passed since its last
// renewal, and the others take them and reload their executions; a
// joining replica gets its share handed over (drain, then delete). Every
// state write is a compare-and-set on the key revision, so a replica that
// has just lost a shard cannot overwrite the new owner's writes.
//
// The shard leases are lease.Ownership's (controller/lease: ownership.go,
// shardrelease.go): its loop, one goroutine, acquires, renews, hands over
// and drops them and publishes which shards this replica works
// (Owns, OwnedShards). What it asks of the rest of the controller is
// lease.OwnershipHost, which ownershipHostOf (parts.go) answers: start a
// newly held shard's report worker (the ingest's, stopped by the ownership
// through lease.ShardWorker), reload its executions, forget the retry
// timers and group-lease bookkeeping of a shard no longer worked, and,
// once a pass, manage the group leases and place the executions waiting
// for an agent. Everything else it gets at construction
// (lease.OwnershipEnv: OwnershipConfig, OwnershipMetrics, the logger,
// clocks, the goroutine runner, the lease view) and at start (ax_leases);
// ShardOwners delegates to it.
//
// A group job (target {group, mode: any}, periodic) is leased by its
// shard's owner to one live member of the group, with an epoch above every
// earlier grant (controller/lease). Agents renew their leases with their
// heartbeats; the reply grants LeaseTTL×0.9 counted from when the agent
// sent the heartbeat, so the agent's lease ends before the controller's.
// A lease not renewed for LeaseTTL moves to another live member (epoch+1).
// Every grant is first added to the job's epoch history in KV ax_epochs
// (controller/lease/epochs.go; no TTL, so it outlives a lease key that
// expired in a controller outage). Every grant after an earlier one sends
// the previous holder unassign and settles the executions of earlier epochs
// (leasesettle.go): another agent's TRIGGERED and RUNNING ones go to
// RETRY_WAITING (reason agent_lost) or FAILED when their attempts are
// spent. A retry goes to the lease's holder when it fires (retries.go). A
// report under an epoch is accepted from the agent that held it, also
// after the lease moved (ingest/reportauth.go); a report older than its
// execution's record is rejected (reason old_epoch). ListAgents fills
// AgentInfo.Leases from ax_leases.
//
// The group leases are lease.GroupLeases's (controller/lease:
// grouplease.go, grouprenew.go, epochs.go): it grants and moves them on
// the ownership loop, renews and releases them for the heartbeats, and
// keeps the epoch history and its view. What it asks of the rest of the
// controller is lease.GroupLeaseHost, which groupLeaseHostOf (parts.go)
// answers: publish a command, read a job from ax_jobs, settle the
// executions of a lease granted again (the agentService's settleEpochs,
// leasesettle.go). Everything else it gets at construction
// (lease.GroupLeaseEnv: GroupLeaseConfig, GroupLeaseMetrics, the logger,
// clocks, the goroutine runner, the lease view, job cache, agent registry
// and the ownership) and at start (Attach: context, connection, buckets,
// the ax_leases of the heartbeat path; FollowEpochs). ownershipHostOf's
// ManageGroupLeases and ForgetShard and fleetHostOf's RenewLeases and
// ReleaseLeases delegate to it; report authorization asks
// it who held an epoch (EpochHolder) and the retries who holds a lease now
// (CurrentHolder). Which agents are a group's members, and which of them
// a job goes to, are the fleet's rules (fleet.GroupMembers,
// fleet.Rendezvous), shared with the placement (controller/placement).
//
// # Report authorization
//
// ingest/reportauth.go: a report is applied only when the agent may make
// it — the subject's shard token is the job's shard, an epoch's report
// comes from that epoch's holder, a fire the controller has not seen is
// of an existing job the agent may fire, and an attempt's report comes
// from the agent the controller sent it to. AX_RPT takes only the shard
// tokens a consumer reads (streams.Config.ReportShards);
// ingest/reportstream.go purges reports an earlier version stored on other
// tokens and exports AX_RPT's fill as gauges.
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
//	                                            unknown_exec, future_attempt, transition,
//	                                            wrong_agent, unknown_job, not_assigned, bad_shard
//	ax_reports_deferred_total         counter   reports ahead of their execution (an earlier
//	                                            step not arrived yet, e.g. redelivered after a
//	                                            controller crash), redelivered later
//	ax_stray_unassigns_total          counter   unassigns sent to agents that fired a job they
//	                                            must not hold (controller/ingest/stray.go)
//	ax_commands_total{kind}           counter   commands published to agents
//	ax_job_changes_total{route}       counter   stored job changes whose commands were sent:
//	                                            local, forwarded (by the shard's owner),
//	                                            served (for another replica), fallback (no
//	                                            owner took it; sent here)
//	ax_shards_owned                   gauge     report shards whose lease this replica holds
//	ax_lease_grants_total             counter   group-job leases granted (first grants and
//	                                            grants after a lapse)
//	ax_lease_expiries_total           counter   group-job leases that lapsed (not renewed for
//	                                            LeaseTTL) and were granted again
//	ax_lease_takeovers_total{kind}    counter   leases taken from another holder: kind=group
//	                                            (a lapsed group lease granted to another agent),
//	                                            kind=shard (a shard lease taken from another replica)
//	ax_lease_failover_seconds         histogram for each group takeover, the time from the last
//	                                            renewal this replica saw to the grant to another agent
//	ax_agent_labels_ignored_total     counter   registrations whose labels differed from the
//	                                            controller's (enrollment, agent label) and were ignored
//	ax_agent_store_resets_total       counter   registrations of agents whose store lost its state
//	                                            (resumed after the commands already sent)
//	ax_report_stream_bytes            gauge     bytes of reports waiting in AX_RPT
//	ax_report_stream_messages         gauge     reports waiting in AX_RPT
//	ax_report_stream_oldest_seconds   gauge     age of the oldest report in AX_RPT
//	ax_report_stream_max_bytes        gauge     AX_RPT's byte bound (reports.max_bytes)
//	ax_report_stream_max_age_seconds  gauge     AX_RPT's age bound (reports.max_age)
//	ax_report_stream_acked_removed_total
//	                                  counter   reports removed from AX_RPT at or below their
//	                                            consumer's ack floor (acknowledged, but left
//	                                            stored by a kill -9 of the server)
//	ax_report_consumers_remade_total
//	                                  counter   report consumers a shard worker made again
//	                                            because they were gone (deleted, or lost by
//	                                            the NATS cluster)
//	ax_command_stream_bytes           gauge     bytes of commands in AX_CMD (every minute)
//	ax_command_stream_messages        gauge     commands in AX_CMD (every minute)
//	ax_command_prunes_total           counter   removals of an agent's applied commands from
//	                                            AX_CMD (cmdprune.go)
//	ax_retention_removed_total{kind}  counter   what the retention sweeper moved out of live
//	                                            state: kind=execution (ax_execs), kind=job
//	                                            (one-shot jobs, ax_jobs)
//	ax_retention_passes_total{ended}  counter   sweeper passes: ended=done (took every
//	                                            execution past the grace), ended=budget (cut
//	                                            after 45 s with some left; another follows at
//	                                            once: one after the other, the sweeper is behind)
//	ax_agent_requests_refused_total{endpoint,reason}
//	                                  counter   agent requests not served (endpoint register,
//	                                            heartbeat or consumer_gateway): reason reply
//	                                            (dropped, the reply is not the agent's inbox),
//	                                            subject (dropped), consumer (refused create/delete);
//	                                            for registrations also busy (queue full), late
//	                                            (waited past 2s) and repeat (the agent's own bound:
//	                                            one waiting, one a second); for heartbeats repeat
//	                                            (two waiting, five per heartbeat interval); for the
//	                                            consumer gateway repeat (ten at once, one per 2s)
//
// The ax_agent_* gauges are set on every heartbeat (and at start from the
// stats stored with each agent's last heartbeat) and deleted when the
// agent is revoked (RevokeAgent). Controller replicas share the heartbeats
// (one queue group): each replica's gauges are as of the last heartbeat it
// answered.
//
// # Logs
//
// Per execution the controller logs one line at info: "execution
// finished" (state, outcome, reason, lag, duration), "execution skipped",
// or "execution retry scheduled" for each attempt that will be retried. At
// debug it also logs "execution created" (PENDING), "execution triggered"
// and "execution running" (with lag). One line per rejected report with
// its reason. Every lease takeover is logged
// with the old and the new holder: "group lease taken over" (with
// old_epoch and new_epoch) and "shard lease taken over". The embedded
// nats-server logs through the controller with component=nats: its
// warnings and errors at their level, its notices and any client's line
// at debug (natslog.go).
//
// # Store failure
//
// When the embedded server can no longer write its store (a full disk, an
// I/O error; JetStream disabled), the controller fails: Failed closes, Err
// and Ready wrap ErrStoreFailed, and the process is expected to Close it
// and exit, so that it is started again, which reopens the store
// (storefailed.go).
package controller
