package controller

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/writemark"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
)

// A reload without a scan of ax_execs. A shard's reload reads every
// execution of its shards (reloadScan), and with 300,000 delayed one-shots
// PENDING that read was 1.4–1.6 s of a 4.4–5.4 s restart to ready, on two
// cores both busy, for records nothing is done with: a PENDING run on an
// agent, due later and written with its effects (before the write marks),
// needs neither a timer, nor a placement, nor a check.
//
// So when the history index (histindex, fed from AX_EVT) has applied every
// event stored, reloadFromIndex reads whole only
//
//   - the records written since `since` (the oldest write mark less
//     sentRunsSkew, for the clocks of the replicas and of the server that
//     stamps the messages): the stream from its first message at or after
//     that time, every record written since (each key's latest), so that
//     everything the scan would check (mayLack) is read as the scan reads
//     it; and
//   - by key, the executions the index holds live and TRIGGERED, RUNNING
//     or RETRY_WAITING, PENDING without an agent, or PENDING and due within
//     sentRunsSkew (histindex.Attention): the records the scan keeps for a
//     timer or a placement, and those an agent may have moved on since
//     (their newest state is read, not the index's).
//
// Every change of state makes an event. A change the controller makes on
// its own is a write op, whose event is stored before the mark passes it
// (writemark); a report's change has its report acknowledged only once
// its event is stored (a replica that dies first leaves the report to the
// shard's next owner). So an execution written
// before `since` that the index holds PENDING on an agent and not due is
// PENDING on that agent in ax_execs (what the scan would only have
// counted), but for a report whose event is still missing: one an agent
// sent for a run it ran, whose execution the index then holds TRIGGERED,
// RUNNING, RETRY_WAITING or PENDING and due, all read by key. (A run a
// clock more than sentRunsSkew ahead fired early is the case left out.)
//
// The records of earlier versions (not Tracked) have no marks: the index
// stands in only when the last reload of every shard found none
// (writemark.Verified.None), and one found among the records read since
// `since` sends the reload back to the scan; an earlier version that wrote
// only long before the marks (a rollback, then this version again) is not
// seen. When the records since `since` are most of the bucket (a kill -9
// right after a burst of creates) the scan reads them as cheaply, without
// waiting for the index to apply their events first.
//
// reloadIndexMax bounds the records read by key: past it (a mass of
// retries waiting, agents offline with runs due) the scan reads them in
// one pass.
const reloadIndexMax = 20000

// reloadIndexFetchers is how many reads by key run at once.
const reloadIndexFetchers = 8

// indexReloadSince returns the time from which a reload that leans on the
// history index reads the records whole, and false when the index may
// not stand in: the write marks could not be read or there is none (a
// reload's own process stores its mark first, so there always is one; the
// check of one-shot jobs without their execution relies on the floor to
// leave out those made before it, which the scan's keys no longer cover),
// or records of earlier versions may be stored (see above).
func (c *reloader) indexReloadSince(merr error, floor time.Time, hasFloor bool, verified writemark.Verified, verr error, scanned time.Time) (time.Time, bool) {
	if c.cfg.reloadScanOnly || merr != nil || !hasFloor || verr != nil || verified.Through.IsZero() || !verified.None {
		return time.Time{}, false
	}
	since := scanned
	if floor.Before(since) {
		since = floor
	}
	return since.Add(-c.cfg.reloadSkew), true
}

// reloadFromIndex gathers what reloadScan gathers, reading only what is
// described above, and sets indexed. It returns nothing gathered (having
// done nothing the scan does not do again: timers and waits it set are
// set again alike) when the index cannot stand in: the records since are
// most of the bucket, the index is behind AX_EVT, more than
// reloadIndexMax executions need a read, or a record of an earlier
// version was read.
func (c *reloader) reloadFromIndex(ctx context.Context, in func(jobID string) bool, mayLack func(*execRecord) bool, since time.Time) (reloadScanned, error) {
	from, span, msgs, err := c.firstExecSeqSince(ctx, since)
	if err != nil {
		c.log.Warn("the reload scans ax_execs", "err", err)
		return reloadScanned{}, nil
	}
	if 2*span > msgs {
		// Most records were written since (a kill -9 right after a burst
		// of creates): the read from the stream is most of a scan, and
		// the index would first have to catch up on their events.
		return reloadScanned{}, nil
	}
	if !c.hist.upToDate(ctx) {
		c.log.Info("history index behind AX_EVT; the reload scans ax_execs")
		return reloadScanned{}, nil
	}
	ids, ok, err := c.hist.idx.Attention(ctx, c.now().Add(c.cfg.reloadSkew), reloadIndexMax)
	if err != nil {
		c.log.Warn("the reload scans ax_execs", "err", err)
		return reloadScanned{}, nil
	}
	if !ok {
		c.log.Info("more executions than an index reload reads by key; the reload scans ax_execs", "max", reloadIndexMax)
		return reloadScanned{}, nil
	}
	a := c.newReloadAcc(in, mayLack, len(ids))
	if err := a.scan(ctx, from); err != nil {
		return reloadScanned{}, err
	}
	if n := a.untracked.Load(); n > 0 {
		c.log.Info("records of an earlier version among those written since the write marks; the reload scans ax_execs", "untracked", n)
		return reloadScanned{}, nil
	}
	var keys []string
	for _, id := range ids {
		if a.s.seen[id] {
			continue // read with the records written since
		}
		if job, _, err := protocol.ParseExecID("exec_id", id); err == nil && !in(job) {
			continue
		}
		keys = append(keys, id)
	}
	recs, err := c.readExecsByKey(ctx, keys)
	if err != nil {
		return reloadScanned{}, err
	}
	for _, v := range recs {
		if it, ok := a.pick(v.rec); ok {
			a.add(v.key, it, v.rev)
		}
	}
	s := a.result()
	s.indexed = true
	return s, nil
}

// keyedExec is a record read by key.
type keyedExec struct {
	key string
	rev uint64
	rec *execRecord
}

// readExecsByKey reads the records of keys (reloadIndexFetchers at a
// time), in the order of keys; a key no longer stored is left out.
func (c *reloader) readExecsByKey(ctx context.Context, keys []string) ([]keyedExec, error) {
	out := make([]keyedExec, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(reloadIndexFetchers, len(keys)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				e, err := c.kv.Execs.Get(ctx, keys[i])
				if errors.Is(err, jetstream.ErrKeyNotFound) {
					continue
				}
				if err != nil {
					errs[i] = fmt.Errorf("read execution %s: %w", keys[i], err)
					continue
				}
				r, err := decodeExec(e.Value())
				if err != nil {
					c.log.Error("bad execution record in KV", "key", keys[i], "err", err)
					continue
				}
				out[i] = keyedExec{key: keys[i], rev: e.Revision(), rec: r}
			}
		}()
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, v := range out {
		if v.rec != nil {
			kept = append(kept, v)
		}
	}
	return kept, nil
}

// firstExecSeqSince returns the sequence of the first message of ax_execs
// stored at or after t (by the server's clock), or the one after the last
// when there is none; span is how many sequences from it to the last (the
// messages since t, and the interior deletes among them), msgs how many
// messages the stream holds.
func (c *reloader) firstExecSeqSince(ctx context.Context, t time.Time) (from, span, msgs uint64, err error) {
	st, err := c.js.Stream(ctx, streams.KVStream(protocol.BucketExecs))
	if err != nil {
		return 0, 0, 0, fmt.Errorf("stream of %s: %w", protocol.BucketExecs, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("stream of %s: %w", protocol.BucketExecs, err)
	}
	last, msgs := info.State.LastSeq, info.State.Msgs
	if msgs == 0 || info.State.LastTime.Before(t) {
		return last + 1, 0, msgs, nil
	}
	fail := func(err error) (uint64, uint64, uint64, error) {
		return 0, 0, 0, fmt.Errorf("first record since %s: %w", t.Format(time.RFC3339Nano), err)
	}
	// One message's metadata is all it reads; the server drops the
	// consumer soon after (not the 5 minutes of nats.go's default).
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime: &t, HeadersOnly: true, InactiveThreshold: 10 * time.Second})
	if err != nil {
		return fail(err)
	}
	batch, err := cons.FetchNoWait(1)
	if err != nil {
		return fail(err)
	}
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			return fail(err)
		}
		from = md.Sequence.Stream
		return from, last - min(from, last) + 1, msgs, nil
	}
	if err := batch.Error(); err != nil {
		return fail(err)
	}
	return last + 1, 0, msgs, nil
}

// indexedLive is what repairHistory takes for the count of the shards'
// live records when the index stood in: unknown, and far more than those
// read whole, so it looks their stamps up by id.
const indexedLive = math.MaxInt32
