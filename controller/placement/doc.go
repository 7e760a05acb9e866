// Package placement decides where a job's work goes in ax-controller
// (docs/architecture.md), one per replica: which agents a periodic job is
// assigned to and the assign and unassign commands that turn one set of
// assignments into another, which agent runs each execution of a fire,
// and the PENDING executions that wait for an agent of their group.
//
// # What it owns
//
//   - Assignments (assign.go): the desired assignments of a periodic job
//     given the fleet (pinned: its agent; mode all: every member of its
//     group with its shard slot; mode any: none, those are leased by the
//     group leases of controller/lease), and the diff that AssignChange
//     (a job created, updated or deleted; toward the newest version the
//     job cache holds, so an overtaken change never sends an older
//     generation) and ReconcileAgent (an agent's
//     record changed, or its assignments are re-sent) send to the agents
//     as assign and unassign commands through Host.PublishCommand.
//   - The agent of each execution of a fire (runs.go): Placements, one
//     Placement (exec id, agent, shard slot) per execution; a run of
//     mode any goes to the rendezvous pick of the online members, else of
//     the registered ones, else to none yet. The controller makes the
//     executions from them (its createRuns and the one-shot fast path).
//   - The executions waiting for an agent (waiting.go): PENDING executions
//     without an agent, of a group with no member yet, noted by
//     NoteWaiting (the effect execution.WaitForAgent, the reload's scan)
//     and forgotten by ForgetWaiting. PlaceUnplaced gives them to a
//     registering member, PlaceWaiting to the online members once a pass
//     of the ownership loop; both cancel those of deleted jobs
//     (Host.CancelDeletedJobRun), as AssignChange does for a deleted job.
//     Placing one is a write op of the controller (Env.Marks) that applies
//     execution.Place (Host.ApplyExec) and sends its run
//     (Host.ExecEffects).
//
// Group membership and the rendezvous pick are the fleet's rules
// (fleet.GroupMembers, fleet.InGroup, fleet.Rendezvous), shared with the
// group leases.
//
// # What it asks of its host
//
// Host is what it needs of the rest of the controller: send a command to
// an agent (PublishCommand), apply an event to an execution and carry out
// its effects (ApplyExec, ExecEffects), and cancel the PENDING execution
// of a deleted job (CancelDeletedJobRun). Everything else it is given at
// construction (New: Env, its Config, the logger, the clock, the assign
// lock, the job cache, the fleet's registry, the write-mark tracker); it
// reads the job cache and the registry and writes neither.
//
// # Concurrency
//
// Env.Assign (the controller's assignMu, also the fleet's
// fleet.Env.Assign: one lock) serializes assignment decisions and guards
// the waiting executions. AssignChange, PlaceWaiting, NoteWaiting,
// ForgetWaiting and Waiting take it; ReconcileAgent and PlaceUnplaced are
// called with it held (by the fleet, after an agent's lock: the agent's
// lock before the assign lock, never the other way round). Every Host
// method is called with the assign lock held, so the host must not take
// it in them, nor call back into the Placer's locking methods (the
// effects of execution.Place and execution.JobDeleted note or forget no
// waiting execution). Placements takes no lock: it reads the registry,
// whose lock is its own. All exported methods are safe for concurrent
// use; the package starts no goroutine.
//
// # Errors
//
// Placements returns an error matching ErrNoMember when a job of mode all
// has no member; the controller makes it match its ErrConflict. Match the
// sentinels (errors.go) with errors.Is.
package placement
