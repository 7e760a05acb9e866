package protocol

// Version is the protocol version this build speaks and writes into every
// message's "v" field. It only goes up; a change of any message's meaning or
// required fields gets a new number and a line in the history below.
//
// History:
//
//	1 (2026-11-29): first version: register, heartbeat, commands (assign,
//	  unassign, run, cancel, lease_grant, lease_revoke), reports (triggered,
//	  running, finished, skipped, interrupted), events.
//	2 (2026-11-30): group-job leases (issue 5). Heartbeat.Leases are the
//	  agent's claims (every group job assigned to it with an epoch, valid
//	  or not); a lease is valid only from a heartbeat reply's Renewed,
//	  counted from when the heartbeat was sent; lease_grant only moves the
//	  epoch; a run with an epoch fires only under that lease; new field
//	  Heartbeat.Stopping (the agent stopped firing and hands its leases
//	  back). Version 1 agents would fire group jobs on a lease_grant read
//	  late from the stream, so they are no longer accepted.
//	  2026-12-01, additive (no new number; agents do not read events):
//	  optional Event.Execution (the execution's snapshot, for the
//	  controllers' history index) and JobRetired on ax.evt.job.retired.<job>.
//	  An event reader built before it refuses such events (unknown field).
//	  2026-12-01, within version 2: optional Report.SkippedCount and
//	  Report.FirstScheduledAt on skipped reports (an agent's skipped fires
//	  of one job coalesced into one report). Nothing required changed, so
//	  the number stays; but decoders refuse unknown fields, so a controller
//	  built before it refuses such a report: agents send them only with
//	  outbox.coalesce_skipped (README, upgrade notes).
//	  2026-12-03, within version 2: optional Event.Via. One event per
//	  change the controller stores: a report that brings several steps
//	  (triggered, running, finished) makes one event on the subject of the
//	  state reached, with From the state before and Via the states passed
//	  through, where it made one event per step. The controllers' history
//	  readers decode events leniently and read it at any build; a strict
//	  reader built before (ax exec watch) refuses such events.
//	  2026-12-05, within version 2 (subjects, no message changed): AX_EVT
//	  stores an event published on ax.evt.<STATE>.<job> on
//	  ax.evt.<STATE>.<n>, n one of 16 partitions of the job id (a subject
//	  transform, EventStoredSubject), and JobRetired is published on
//	  ax.evt.job.retired.<n> instead of ax.evt.job.retired.<job>. A
//	  consumer of AX_EVT that filtered one job's subject filters its
//	  partition and the job_id (ax exec watch --job); core subscribers
//	  see what was published, as before.
//	  2026-12-06, within version 2: optional Heartbeat.Cursor (the
//	  command cursor the agent's store holds), from which the controller
//	  removes the commands an agent applied from AX_CMD. A controller
//	  built before it refuses such heartbeats (unknown field): agents
//	  send it only with nats.report_cursor (README, upgrade notes).
const Version = 2

// MinVersion is the oldest protocol version this build still accepts.
const MinVersion = 2

// checkVersion validates a message's "v" field.
func checkVersion(v int) error {
	if v == 0 {
		return fieldErr(ErrVersion, "v", "is required")
	}
	if v < MinVersion || v > Version {
		return fieldErrf(ErrVersion, "v", "version %d not supported (this build speaks %d..%d)", v, MinVersion, Version)
	}
	return nil
}
