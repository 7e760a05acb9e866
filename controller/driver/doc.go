// Package driver is the one path from a stored job change to the agents'
// commands in ax-controller (docs/architecture.md): the replica that
// works a job's shard sends the commands of every change of that job
// (the assign and unassign diff of a periodic job, the PENDING executions
// and run commands of a one-shot job, the unassigns and cancels of a
// delete), whichever replica's API stored the change.
//
// # Why
//
// Before, the HTTP handler that stored a change sent its commands inline,
// on whichever replica took the request. Two replicas changing one job
// sent commands for it at once, each from its own view of the fleet, and
// relied on the agent to order them by generation. Now the commands of a
// job come from the one replica that already owns the job's reports,
// retries and group leases (its shard, lease.Ownership): one view of the
// job, one sender.
//
// # The path of a change
//
// The API stores the change (a compare-and-set in ax_jobs) and calls
// Drive inside its write op (controller/writemark). Drive:
//
//   - sends the commands itself (Host.Dispatch) when this replica works
//     the job's shard, or no live owner is known: RouteLocal. A lone
//     replica works every shard, so this is the embedded default's only
//     path, with no message between replicas;
//   - else publishes a request on Subject(owner instance) with the old and
//     new job and waits for the owner's reply: RouteForwarded. The owner
//     checks the request (DecodeRequest), that it still works the shard,
//     queues it to one of Config.Workers workers, calls Host.Dispatch
//     and replies done (RouteServed on its side);
//   - when the owner refuses (ReasonNotOwner while the shard moves,
//     ReasonBusy, ReasonStopping), does not answer within Config.Timeout
//     or is not there (no responders), sends the commands itself:
//     RouteFallback, with the owner's error returned for the log;
//   - an owner that did not answer within Config.Timeout (ErrSilent:
//     frozen, or cut off with its connection open) is not asked again for
//     Config.Hold (30 s; the controller's forward.timeout and forward.hold
//     set the two): the changes of its shards are sent at once
//     (RouteFallback, ErrNotAsked) and Local reports true for them, so it
//     holds one API call for the timeout, not every call until its leases
//     lapse and another replica takes its shards.
//
// Worked example: replicas A and B; job J's shard 5 is leased to B. A
// takes PUT /v1/jobs/J:pause, stores generation 3 and calls Drive. A does
// not own shard 5; its lease view names B's instance 0a1b…, so A requests
// ax.ctl.drive.0a1b… with {rev: 812, old: gen 2, next: gen 3}. B's worker sends
// J's agents unassign(J, 3) and replies done; A answers the API call.
// Had B stopped meanwhile, A would have got no responders and sent the
// unassigns itself.
//
// # Order
//
// A change carries the revision ax_jobs stored it at (Change.Rev), and
// the owner sends its commands toward the newest version of the job it
// knows (Host.Dispatch): a change overtaken by a later one (two replicas'
// API calls at once, a request that arrived late) sends the diff from its
// old version to that newer one, never an older generation after a newer
// one. That matters because an unassign carries no generation and the
// agent keeps no record of a job taken from it: a late assign of an old
// generation would give the job back to an agent it was moved away from,
// until the agent's first fire of it was refused.
//
// # Crash safety
//
// The sender's write op stays open until the reply (or its own send), so
// its write mark stays before the change: a kill -9 of either replica
// between the store and the commands leaves a mark that makes the next
// reload of the shard re-send the job's commands (the controller's
// reassignChanged and createMissingOneShots). A change sent twice (a
// reply lost after the owner sent, then the fallback) does no harm:
// Host.Dispatch is idempotent.
//
// # Trust
//
// Only controllers publish on SubjectPrefix: on the embedded server the
// subject is in account AX, which an agent reaches only through imports
// scoped to its own subjects (controller/auth). An external server's
// operator grants ax.ctl.> to the controllers' users only. A request is
// still decoded strictly (unknown fields, other versions, ids that do not
// match and generations that go back are refused, ErrBadRequest).
//
// # Concurrency
//
// Drive and Local are safe for concurrent use and block only in
// Host.Dispatch and the request. The subscription's handler only decodes
// and queues; the workers (Env.GoRun, ended with the context Serve is
// given) own the queue. The package reads no clock but NATS's timeouts.
package driver
