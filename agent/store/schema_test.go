package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// TestMigrateOutboxKeepsRowsAndSeq: a schema 2 file with unacknowledged
// reports (and acknowledged ones deleted, so its seq sequence is above
// its rows) keeps its rows and seqs; the unique index on msg_id is gone
// (it cost a b-tree write per report and per acknowledgement); new rows
// continue after the highest seq ever used.
func TestMigrateOutboxKeepsRowsAndSeq(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	writeDB(t, path, migrations[0], migrations[1], "PRAGMA user_version = 2",
		`INSERT INTO outbox(msg_id, subject, data) VALUES ('m1', 's', 'a'), ('m2', 's', 'b'), ('m3', 's', 'c'), ('m4', 's', 'd')`,
		`DELETE FROM outbox WHERE seq IN (1, 4)`)
	s := open(t, path)
	ctx := context.Background()
	rows, err := s.Outbox(ctx, 0, 10)
	if err != nil || len(rows) != 2 || rows[0].Seq != 2 || rows[0].MsgID != "m2" || rows[1].Seq != 3 || string(rows[1].Data) != "c" {
		t.Fatalf("outbox after migration %+v (%v), want m2 and m3 at seqs 2 and 3", rows, err)
	}
	var unique int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM pragma_index_list('outbox') WHERE "unique" = 1`).Scan(&unique); err != nil || unique != 0 {
		t.Fatalf("outbox has %d unique indexes (%v), want 0", unique, err)
	}
	if err := s.Do(ctx, func(tx *Tx) error { return tx.Enqueue("m5", "s", []byte("e")) }); err != nil {
		t.Fatal(err)
	}
	rows, err = s.Outbox(ctx, 3, 10)
	if err != nil || len(rows) != 1 || rows[0].Seq != 5 || rows[0].MsgID != "m5" {
		t.Fatalf("new row %+v (%v), want m5 at seq 5 (4 was used before)", rows, err)
	}
}

// TestLiveStateIndexHoldsJobID: the live-state index holds job_id, so a
// reload that leaves parked jobs out (LiveExecsExcept) tells their rows
// apart in the index without reading each from the table.
func TestLiveStateIndexHoldsJobID(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agent.db"))
	rows, err := s.rdb.Query(`SELECT name FROM pragma_index_info('execs_state') ORDER BY seqno`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	if len(cols) != 3 || cols[0] != "state" || cols[1] != "id" || cols[2] != "job_id" {
		t.Fatalf("execs_state indexes %v, want state, id, job_id", cols)
	}
}

// writeDB runs queries on a new SQLite file at path, without the store:
// a file as an earlier version of the agent left it.
func writeDB(t *testing.T, path string, queries ...string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range queries {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHeldSkipsMigrateAndPersist: a schema 4 file's jobs keep their rows
// and hold no skipped fires after the migration; SetSkips holds a run in
// the job's row (read back by Jobs and Job, after a reopen too), a zero
// run clears it, and SetSkips leaves last_fire alone.
func TestHeldSkipsMigrateAndPersist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	writeDB(t, path, migrations[0], migrations[1], migrations[2], migrations[3], "PRAGMA user_version = 4",
		`INSERT INTO jobs(id, generation, spec, last_fire) VALUES ('j1', 3, '{}', 1000)`)
	s := open(t, path)
	ctx := context.Background()
	j, err := s.Job(ctx, "j1")
	if err != nil || j.Generation != 3 || j.LastFire.UnixNano() != 1000 || j.Skips != (Skips{}) {
		t.Fatalf("migrated job %+v (%v), want generation 3, last_fire 1000, no skips", j, err)
	}
	held := Skips{N: 7, First: time.Unix(10, 0).UTC(), Last: time.Unix(16, 0).UTC(), Epoch: 4}
	if err := s.Do(ctx, func(tx *Tx) error { return tx.SetSkips(j.Ref, held) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	jobs, err := s.Jobs(ctx)
	if err != nil || len(jobs) != 1 || jobs[0].Skips != held || jobs[0].LastFire.UnixNano() != 1000 {
		t.Fatalf("jobs after a reopen %+v (%v), want skips %+v and last_fire 1000", jobs, err, held)
	}
	if err := s.Do(ctx, func(tx *Tx) error { return tx.SetSkips(j.Ref, Skips{}) }); err != nil {
		t.Fatal(err)
	}
	if j, err := s.Job(ctx, "j1"); err != nil || j.Skips != (Skips{}) {
		t.Fatalf("job after clearing %+v (%v), want no skips", j, err)
	}
}
