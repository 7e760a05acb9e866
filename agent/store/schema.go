package store

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations[i] brings the schema from version i to i+1. The version is kept
// in PRAGMA user_version and bumped in the same transaction as the DDL, so a
// crash mid-migration leaves the previous version intact.
var migrations = []string{
	// 1: first schema.
	`
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE jobs (
	ref          INTEGER PRIMARY KEY AUTOINCREMENT,
	id           TEXT NOT NULL UNIQUE,
	generation   INTEGER NOT NULL,
	spec         BLOB NOT NULL,
	shard_index  INTEGER NOT NULL DEFAULT -1,
	shard_total  INTEGER NOT NULL DEFAULT 0,
	epoch        INTEGER NOT NULL DEFAULT 0,
	lease_expiry INTEGER NOT NULL DEFAULT 0,
	last_fire    INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE execs (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	exec_id      TEXT NOT NULL,
	attempt      INTEGER NOT NULL,
	job_id       TEXT NOT NULL,
	state        TEXT NOT NULL,
	priority     INTEGER NOT NULL DEFAULT 0,
	fine         INTEGER NOT NULL DEFAULT 0,
	concurrency  INTEGER NOT NULL DEFAULT 1,
	scheduled_at INTEGER NOT NULL,
	run_at       INTEGER NOT NULL,
	epoch        INTEGER NOT NULL DEFAULT 0,
	shard_index  INTEGER NOT NULL DEFAULT -1,
	shard_total  INTEGER NOT NULL DEFAULT 0,
	spec         BLOB,
	triggered_at INTEGER NOT NULL DEFAULT 0,
	started_at   INTEGER NOT NULL DEFAULT 0,
	finished_at  INTEGER NOT NULL DEFAULT 0,
	outcome      TEXT NOT NULL DEFAULT '',
	result       BLOB,
	UNIQUE (exec_id, attempt)
);
CREATE INDEX execs_state ON execs (state, id);
CREATE INDEX execs_done ON execs (finished_at) WHERE finished_at > 0;

CREATE TABLE outbox (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	msg_id  TEXT NOT NULL UNIQUE,
	subject TEXT NOT NULL,
	data    BLOB NOT NULL
);
`,
	// 2: execs.periodic marks the fires of periodic jobs the agent made
	// itself (a restart applies the job's misfire policy to those never
	// started); rows of older files are runs sent by the controller.
	`ALTER TABLE execs ADD COLUMN periodic INTEGER NOT NULL DEFAULT 0;`,
	// 3: outbox without the unique index on msg_id. Every report is
	// enqueued in the transaction that moves its attempt's row out of the
	// state it reports from, so a msg id is never enqueued twice; the
	// index cost a b-tree insert per report and a delete per acknowledged
	// one. The seq sequence carries over, so seqs are never reused.
	`
CREATE TABLE outbox_v3 (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	msg_id  TEXT NOT NULL,
	subject TEXT NOT NULL,
	data    BLOB NOT NULL
);
INSERT INTO outbox_v3(seq, msg_id, subject, data) SELECT seq, msg_id, subject, data FROM outbox ORDER BY seq;
DELETE FROM sqlite_sequence WHERE name = 'outbox_v3';
INSERT INTO sqlite_sequence(name, seq) SELECT 'outbox_v3', seq FROM sqlite_sequence WHERE name = 'outbox';
DROP TABLE outbox;
ALTER TABLE outbox_v3 RENAME TO outbox;
`,
	// 4: the live-state index also holds job_id, so that a reload that
	// leaves out parked jobs (LiveExecsExcept) skips their rows in the
	// index instead of reading each row from the table.
	`
DROP INDEX execs_state;
CREATE INDEX execs_state ON execs (state, id, job_id);
`,
	// 5: jobs.skip_* hold a job's run of overlap-skipped fires that a real
	// fire moved last_fire past before the run was reported (Job.Skips),
	// so that the run can outlive real fires without being lost in a
	// crash.
	`
ALTER TABLE jobs ADD COLUMN skip_n INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN skip_first INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN skip_last INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN skip_epoch INTEGER NOT NULL DEFAULT 0;
`,
	// 6: removed holds, for a job taken from this agent, the generation it
	// was taken at (DeleteJob), so that an assign of an older generation
	// that arrives after the unassign (commands of two controller replicas
	// crossing) does not give the job back (PutJob). Rows older than the
	// retention of finished attempts are pruned with them.
	`
CREATE TABLE removed (
	id         TEXT PRIMARY KEY,
	generation INTEGER NOT NULL,
	at         INTEGER NOT NULL
) WITHOUT ROWID;
`,
}

// SchemaVersion is the schema version this build writes.
func SchemaVersion() int { return len(migrations) }

func migrate(ctx context.Context, db *sql.DB) error {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", classify(err))
	}
	if v > len(migrations) {
		return fmt.Errorf("%w: file has version %d, this build knows up to %d", ErrSchema, v, len(migrations))
	}
	for ; v < len(migrations); v++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migrate to %d: %w", v+1, classify(err))
		}
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migrate to %d: %w", v+1, classify(err))
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", v+1)); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("migrate to %d: %w", v+1, classify(err))
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("migrate to %d: %w", v+1, classify(err))
		}
	}
	return nil
}
