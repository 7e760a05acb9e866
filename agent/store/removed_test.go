package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestRemovedJobKeepsOlderAssignsOut: a job taken at a generation is not
// given back by an assign of an older one (two senders' commands
// crossing), is by one of that generation or a newer one, and the record
// of the removal goes with the prune. An unassign of any generation (0)
// keeps out the generations before the deleted row's; one of a job the
// agent never held keeps out those before its own.
func TestRemovedJobKeepsOlderAssignsOut(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "agent.db"))
	ctx := context.Background()
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	put := func(id string, gen uint64) bool {
		t.Helper()
		var w bool
		if err := s.Do(ctx, func(tx *Tx) error {
			var err error
			_, _, w, err = tx.PutJob(Job{ID: id, Generation: gen, Spec: []byte(`{}`)})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return w
	}
	del := func(id string, gen uint64) {
		t.Helper()
		if err := s.Do(ctx, func(tx *Tx) error { _, err := tx.DeleteJob(id, gen, at); return err }); err != nil {
			t.Fatal(err)
		}
	}
	held := func(id string) bool {
		_, err := s.Job(ctx, id)
		return err == nil
	}

	// Moved away at generation 2: the late assign of generation 1 stays out.
	if !put("j1", 1) {
		t.Fatal("first assign not written")
	}
	del("j1", 2)
	if put("j1", 1) || held("j1") {
		t.Fatal("an assign of generation 1 after an unassign at 2 gave the job back")
	}
	// Given back at generation 2 (the same generation: a group member
	// that left and joined again): taken.
	if !put("j1", 2) || !held("j1") {
		t.Fatal("an assign of generation 2 after an unassign at 2 refused")
	}
	// An unassign of any generation keeps out those before the deleted
	// row's (2); generation 3 is taken.
	del("j1", 0)
	if put("j1", 1) {
		t.Fatal("an assign of generation 1 after an unassign of any generation of a row at 2 written")
	}
	if !put("j1", 3) {
		t.Fatal("an assign of generation 3 refused")
	}

	// Never held: an unassign at 5 keeps out generation 4 that comes after.
	del("j2", 5)
	if put("j2", 4) {
		t.Fatal("an assign of generation 4 after an unassign at 5 of a job never held written")
	}
	// Unassign of any generation of a job never held: nothing kept out.
	del("j3", 0)
	if !put("j3", 1) {
		t.Fatal("an assign after an unassign of any generation of a job never held refused")
	}

	// The prune forgets the removal.
	if err := s.Do(ctx, func(tx *Tx) error { _, err := tx.Prune(at.Add(time.Second)); return err }); err != nil {
		t.Fatal(err)
	}
	if !put("j2", 4) {
		t.Fatal("an assign after the prune refused")
	}
}

// TestRemovedMigrates: a file of schema 5 gets the removed table.
func TestRemovedMigrates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.db")
	writeDB(t, path, migrations[0], migrations[1], migrations[2], migrations[3], migrations[4], "PRAGMA user_version = 5",
		`INSERT INTO jobs(id, generation, spec) VALUES ('j1', 3, '{}')`)
	s := open(t, path)
	ctx := context.Background()
	if err := s.Do(ctx, func(tx *Tx) error { _, err := tx.DeleteJob("j1", 0, time.Unix(100, 0)); return err }); err != nil {
		t.Fatal(err)
	}
	if err := s.Do(ctx, func(tx *Tx) error {
		_, _, w, err := tx.PutJob(Job{ID: "j1", Generation: 2, Spec: []byte(`{}`)})
		if w {
			t.Error("an assign of generation 2 after the unassign of the migrated row at 3 written")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
