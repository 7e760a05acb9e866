// Package writemark keeps a controller replica's write mark: the time
// before which every execution record this process wrote has the stored
// effects that go with it (its run command in AX_CMD, its events in
// AX_EVT).
//
// The controller writes an execution record first and publishes what
// follows from it after, so a process killed between the two leaves a
// record without its command or event. A replica that acquires shards used
// to find those by reading back every PENDING record's run command and
// comparing every live record with the history index: about 4 s of CPU at
// 300,000 pending one-shot jobs, on every start. With the mark it checks
// only the records written at or after the oldest mark of any replica.
//
// # The mark
//
// Every change the controller makes to an execution on its own (a create,
// a retry, an operator's cancel or retry, an agent lost, a delete) runs as
// an Op: Tracker.Begin before the record is computed, Op.End when the code
// is done. Effects whose acknowledgement comes later are held (Op.Hold),
// and an effect that may not be stored (a failed publish, a write whose
// outcome is unknown) fails the op (Op.Fail). Through is the begin time of
// the oldest op not finished, or now when none is open; a failed op stays
// open for the life of the process, so the mark never passes a record
// whose effects may be missing. Report-driven writes need no op: their
// report is acknowledged only after the record and its events are stored,
// and redelivered otherwise.
//
// The controller stores Through in KV ax_marks under its own key, once
// before its first write and then every second, and deletes the key when
// it stops cleanly with no op open (Tracker.Close refuses later ops). A
// reload takes the smallest Through of all keys; a record older than that
// (less a margin for the wall clock) was written with its effects. The key
// of a killed process stays, and keeps every later reload checking the
// records since its mark; each reload by another process then adds the
// shards it checked to the key's Covered, and the key is removed once
// every shard is covered. A replica that sees such a key not covering the
// shards it already works (no takeover reloads those) reloads them.
//
// Records of earlier versions (not Tracked) have no mark to judge them
// by: a reload of every shard checks them, and stores under VerifiedKey
// the time its scan began; later reloads check only the untracked records
// written after it.
//
// # Worked example
//
// Ops begin at 10:00:00.0 (a create) and 10:00:00.2 (a cancel). At
// 10:00:00.5 Through is 10:00:00.0. The create ends at 10:00:00.6: Through
// is 10:00:00.2. The cancel's event publish fails: the op is pinned and
// Through stays 10:00:00.2 until the process ends, so any reload checks
// every record written from then on.
//
// # Costs and concurrency
//
// Begin, Hold, End and Fail take one mutex and touch one map entry; Through
// walks the open ops (a handful at a time: one per request or timer in
// flight). The Tracker is safe for concurrent use. It does no I/O and reads
// time only through the clocks passed to New.
package writemark
