package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/writemark"
)

// Write marks (controller/writemark): every change this replica makes to
// an execution on its own, and every change of a job with its dispatch,
// runs as an op of c.marks, and the replica keeps its mark in KV ax_marks
// under marksKey, so that a reload checks the effects of only the records
// written, and re-sends the assignments of only the periodic jobs
// changed, at or after the oldest mark of any replica (reload.go).

const (
	// marksInterval is how often the mark is stored.
	marksInterval = time.Second
	// marksMargin is how much older than the oldest mark a record must be
	// to be taken as written with its effects: room for a step of the
	// wall clock between an op's begin and its record's updated_at.
	marksMargin = 2 * time.Second
	// lateAckWait bounds how long an op waits for an effect's ack after
	// its code gave up waiting; past it the op fails (its mark stays).
	lateAckWait = time.Minute
)

// marksKey is this process's key in ax_marks.
func (c *core) marksKey() string { return writemark.Key(c.cfg.Node, c.instance) }

// storeMark stores the current mark under marksKey.
func (c *core) storeMark(ctx context.Context) error {
	m := c.marks.Mark()
	data, err := writemark.Encode(writemark.Value{Node: c.cfg.Node, Instance: c.instance, Through: m.Through, Open: m.Open, Failed: m.Failed})
	if err != nil {
		return err
	}
	if _, err := c.kv.Marks.Put(ctx, c.marksKey(), data); err != nil {
		return fmt.Errorf("store write mark: %w", err)
	}
	c.m.marksOpen.Set(float64(m.Open))
	c.m.marksFailed.Set(float64(m.Failed))
	return nil
}

// marksLoop stores the mark every marksInterval until ctx ends.
func (c *core) marksLoop(ctx context.Context) {
	c.every(ctx, marksInterval, marksInterval, "store write mark", func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return c.storeMark(ctx)
	})
}

// finishMarks runs at a clean stop, after the loops ended: no op may
// begin any more; with none open the key is removed (nothing this process
// wrote lacks its effects), otherwise the final mark is stored.
func (c *core) finishMarks() {
	if c.kv.Marks == nil {
		return
	}
	m, idle := c.marks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var err error
	if idle {
		err = c.kv.Marks.Delete(ctx, c.marksKey())
	} else {
		err = c.storeMark(ctx)
	}
	if err != nil {
		c.log.Warn("final write mark", "idle", idle, "open", m.Open, "err", err)
	}
}

// storedMark is one key of ax_marks as a reload read it.
type storedMark struct {
	key   string
	rev   uint64
	value writemark.Value
}

// readMarks returns every key of ax_marks. A value that does not decode
// is an error: its process's records cannot be judged.
func (c *core) readMarks(ctx context.Context) ([]storedMark, error) {
	keys, err := c.kv.Marks.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("read write marks: %w", err)
	}
	var out []storedMark
	for k := range keys.Keys() {
		if k == writemark.VerifiedKey {
			continue // not a process's mark (readVerified)
		}
		e, err := c.kv.Marks.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // removed since listed: that process ended cleanly
		}
		if err != nil {
			_ = keys.Stop()
			return nil, fmt.Errorf("read write mark %s: %w", k, err)
		}
		v, err := writemark.Decode(e.Value())
		if err != nil {
			_ = keys.Stop()
			return nil, fmt.Errorf("read write mark %s: %w", k, err)
		}
		out = append(out, storedMark{key: k, rev: e.Revision(), value: v})
	}
	return out, nil
}

// readVerified returns the time before which the records of earlier
// versions (not tracked) were checked by a reload of every shard; zero
// when none was.
func (c *core) readVerified(ctx context.Context) (writemark.Verified, uint64, error) {
	e, err := c.kv.Marks.Get(ctx, writemark.VerifiedKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return writemark.Verified{}, 0, nil
	}
	if err != nil {
		return writemark.Verified{}, 0, fmt.Errorf("read %s: %w", writemark.VerifiedKey, err)
	}
	v, err := writemark.DecodeVerified(e.Value())
	if err != nil {
		return writemark.Verified{}, 0, err
	}
	return v, e.Revision(), nil
}

// storeVerified records, after a reload of every shard whose scan began
// at scanned, that the untracked records written before it are checked,
// and whether there were none (writemark.Verified.None): compare-and-set
// on rev (0: the key was absent), and only forward. It returns whether it
// stored it.
func (c *core) storeVerified(ctx context.Context, prev writemark.Verified, rev uint64, scanned time.Time, none bool) bool {
	if !scanned.After(prev.Through) {
		return false
	}
	data, err := writemark.EncodeVerified(writemark.Verified{Through: scanned, None: none})
	if err == nil {
		if rev == 0 {
			_, err = c.kv.Marks.Create(ctx, writemark.VerifiedKey, data)
		} else {
			_, err = c.kv.Marks.Update(ctx, writemark.VerifiedKey, data, rev)
		}
	}
	if err != nil {
		c.log.Warn("record the check of earlier versions' records", "err", err)
		return false
	}
	return true
}

// marksFloor returns the time before which a tracked record was written
// with its effects: the oldest mark of marks, less margin.
func marksFloor(marks []storedMark, margin time.Duration) (time.Time, bool) {
	vs := make([]writemark.Value, len(marks))
	for i, m := range marks {
		vs[i] = m.value
	}
	t, ok := writemark.Oldest(vs)
	if !ok {
		return time.Time{}, false
	}
	return t.Add(-margin), true
}

// deadMark reports whether m is the mark of a process that ended: its
// replica presence in ax_leases lapsed, or names a later process of its
// node (a restart).
func (c *core) deadMark(m storedMark) bool {
	return m.key != c.marksKey() && !c.leases.LiveInstance(m.value.Node, m.value.Instance, c.mono(), c.cfg.LeaseTTL)
}

// coverMarks records, after a reload that checked shards, that the
// records of the dead processes among marks (read before the reload's
// scan) are checked on those shards; a mark covered on every shard is
// removed. It returns how many it removed.
func (c *core) coverMarks(ctx context.Context, marks []storedMark, shards map[int]bool) int {
	list := make([]int, 0, len(shards))
	for s := range shards {
		list = append(list, s)
	}
	removed := 0
	for _, m := range marks {
		if !c.deadMark(m) {
			continue
		}
		gone, err := c.coverMark(ctx, m, list)
		if err != nil {
			c.log.Warn("record a dead process's write mark as checked", "key", m.key, "err", err)
		}
		if gone {
			removed++
		}
	}
	return removed
}

// coverMark adds shards to the Covered of mark m, or removes m once every
// shard is covered, with compare-and-set on the revision read. When the
// key changed meanwhile it is read again: another replica's cover (the
// same process and mark) is merged, a new mark (the process lives after
// all, and stored it again) is left as it is.
func (c *core) coverMark(ctx context.Context, m storedMark, shards []int) (removed bool, err error) {
	for range 3 {
		v := m.value.Cover(shards)
		if len(v.Covered) >= c.cfg.Shards {
			err = c.kv.Marks.Delete(ctx, m.key, jetstream.LastRevision(m.rev))
		} else {
			var data []byte
			if data, err = writemark.Encode(v); err == nil {
				_, err = c.kv.Marks.Update(ctx, m.key, data, m.rev)
			}
		}
		if err == nil {
			return len(v.Covered) >= c.cfg.Shards, nil
		}
		e, gerr := c.kv.Marks.Get(ctx, m.key)
		if errors.Is(gerr, jetstream.ErrKeyNotFound) {
			return false, nil // removed by another replica
		}
		if gerr != nil {
			return false, err
		}
		cur, derr := writemark.Decode(e.Value())
		if derr != nil || cur.Instance != m.value.Instance || !cur.Through.Equal(m.value.Through) {
			return false, nil // a new mark of a live process, or not one to judge
		}
		m.value, m.rev = cur, e.Revision()
	}
	return false, err
}

// marksSweepInterval is how often a replica looks for the marks of
// processes that ended.
const marksSweepInterval = 10 * time.Second

// marksSweepMax bounds how long the sweep waits after reloads that did
// not settle a mark (a repair that keeps failing): the wait doubles from
// marksSweepInterval after each, so that a full scan of ax_execs is not
// repeated every few seconds.
const marksSweepMax = 5 * time.Minute

// marksSweepLoop runs sweepMarks every marksSweepInterval until ctx ends,
// backing off while its reloads leave a mark unsettled.
func (c *reloader) marksSweepLoop(ctx context.Context) {
	base := c.cfg.marksSweep
	if base <= 0 {
		base = marksSweepInterval
	}
	wait := base
	t := c.clk.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		reloaded, err := c.sweepMarks(ctx)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("check the records of ended processes", "err", err)
		}
		if reloaded {
			wait = min(2*wait, marksSweepMax) // settled, the next sweep finds nothing and resets it
		} else {
			wait = base
		}
		t.Reset(wait)
	}
}

// sweepMarks reloads this replica's shards when a process that ended left
// a mark not covering all of them: its records on shards this replica
// already owned (a create it answered, a retry it sent) are checked by no
// takeover, so their lost commands and events are restored here.
//
// It reports whether it reloaded.
func (c *reloader) sweepMarks(ctx context.Context) (bool, error) {
	owned := c.own.OwnedShards()
	if len(owned) == 0 {
		return false, nil
	}
	marks, err := c.readMarks(ctx)
	if err != nil {
		return false, err
	}
	uncovered := false
	for _, m := range marks {
		if c.deadMark(m) && len(m.value.Cover(owned).Covered) > len(m.value.Covered) {
			uncovered = true
			break
		}
	}
	if !uncovered {
		return false, nil
	}
	shards := make(map[int]bool, len(owned))
	for _, s := range owned {
		shards[s] = true
	}
	return true, c.reloadShards(ctx, shards)
}

// holdLate keeps op open until futs are acknowledged (at most
// lateAckWait): its code stopped waiting for them. One that fails, or
// does not answer in time, fails the op.
func (c *core) holdLate(op *writemark.Op, futs []jetstream.PubAckFuture) {
	if op == nil || len(futs) == 0 {
		return
	}
	release := op.Hold()
	go func() {
		t := c.clk.NewTimer(lateAckWait)
		defer t.Stop()
		for _, f := range futs {
			select {
			case <-f.Ok():
			case <-f.Err():
				release(false)
				return
			case <-t.C():
				release(false)
				return
			}
		}
		release(true)
	}()
}

// opWrite checks, before a write of an execution record, that ctx carries
// an op that may write; a write outside any op pins the mark (and is
// counted: a path that forgot its op).
func (c *core) opWrite(ctx context.Context) (*writemark.Op, error) {
	op := writemark.From(ctx)
	if op == nil {
		c.marks.Untracked()
		return nil, nil
	}
	if err := op.Refused(); err != nil {
		return op, fmt.Errorf("%w: %w", ErrNotReady, err)
	}
	return op, nil
}
