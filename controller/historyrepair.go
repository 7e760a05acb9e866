package controller

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/histindex"
)

// A transition's event is published after its record is written; a
// controller killed between the two leaves the record ahead of AX_EVT. A
// report-driven transition gets its event back when the report is
// redelivered (doc.go), but a transition the controller made on its own
// (an operator's cancel or retry, a retry scheduled for a lost agent)
// would stay missing from the history index, which the API lists from.
// So when a replica acquires shards (at start, or by takeover) it compares
// the live records of those shards with the index, once the index holds
// every stored event, and publishes the event of each record the index
// does not have at its revision. The Msg-Id of an event is the same as the
// lost one's, so an event that was in fact stored is dropped by the
// stream's de-duplication.

// covers reports whether the index's snapshot is rec's or newer. The
// steps of one report share their updated_at (a coalesced report applies
// triggered, running and finished at once), so the state is compared too:
// an index that kept the RUNNING step of a SUCCESS record lacks its last
// event.
func covers(s histindex.Stamp, rec *execRecord) bool {
	at := rec.UpdatedAt.UnixNano()
	return s.At > at || (s.At == at && s.State == rec.State)
}

// repairHistory publishes the events the history index lacks for recs,
// live records of shards; live is how many live records the shards hold
// (the reload's scan). It does nothing while the index is behind AX_EVT
// (errHistoryBehind): a record it lacks then may only be on its way.
func (c *reloader) repairHistory(ctx context.Context, shards map[int]bool, recs []*execRecord, live int) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	if !c.hist.upToDate(ctx) {
		return 0, errHistoryBehind
	}
	have, err := c.stampsFor(ctx, shards, recs, live)
	if err != nil {
		return 0, err
	}
	var futs []jetstream.PubAckFuture
	for _, r := range recs {
		if st, ok := have[r.ExecID]; ok && covers(st, r) {
			continue
		}
		if c.changedSince(ctx, r) {
			continue
		}
		if fut := c.ex.publishEvent(r, transition{to: r.State, reason: r.Reason}); fut != nil {
			futs = append(futs, fut)
		}
	}
	for _, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return len(futs), fmt.Errorf("restore event: %w", err)
		case <-ctx.Done():
			return len(futs), ctx.Err()
		}
	}
	return len(futs), nil
}

// changedSince reports whether rec, read by the reload's scan, has been
// written again or removed since: the shard's lanes apply reports while
// the reload runs, and the event of a newer write is stored already (from
// the state rec is at). Its event, published now, would come after that
// one; it is left out (the newer event says where the execution went from
// there). A failed read says no.
func (c *reloader) changedSince(ctx context.Context, rec *execRecord) bool {
	cur, err := c.ex.execs().Get(ctx, rec.ExecID)
	if err != nil {
		return false
	}
	return cur.Rec == nil || cur.Rec.State != rec.State || cur.Rec.Attempt != rec.Attempt || !cur.Rec.UpdatedAt.Equal(rec.UpdatedAt)
}

// stampsFor returns the index's stamps of recs, live records of shards
// (which hold live in all): looked up by id when recs are fewer than
// about four in five of the live records (BenchmarkStamps: a lookup costs
// about 1.25 times a row of the shards' read), else read with every live
// row of the shards. After a crash a reload checks only the records
// written since the dead process's write marks, often a few among
// 300,000.
func (c *reloader) stampsFor(ctx context.Context, shards map[int]bool, recs []*execRecord, live int) (map[string]histindex.Stamp, error) {
	if 5*len(recs) < 4*live {
		ids := make([]string, len(recs))
		for i, r := range recs {
			ids[i] = r.ExecID
		}
		return c.hist.idx.StampsOf(ctx, ids)
	}
	list := make([]int, 0, len(shards))
	for s := range shards {
		list = append(list, s)
	}
	return c.hist.idx.Stamps(ctx, list)
}
