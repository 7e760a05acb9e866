package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/axsched/ax/agent/handler"
	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// maxStack bounds the panic stack kept in a result message.
const maxStack = 8 << 10

// worker runs attempts handed to it by the run queue: the handler, then
// the FINISHED (or INTERRUPTED) write with its report.
type worker struct {
	env *env
}

// loop runs attempts from work until it is closed.
func (w *worker) loop(work <-chan workUnit) {
	var specs specCache
	for u := range work {
		w.runOne(u, &specs)
	}
}

// runSpec is what a worker needs of a job's spec to run an attempt.
type runSpec struct {
	handler string
	timeout protocol.Duration
	payload []byte
}

// specOf returns the runSpec of j.
func specOf(j protocol.Job) runSpec {
	return runSpec{handler: j.Handler, timeout: j.Timeout, payload: j.Payload}
}

// specCache keeps the last job spec a worker decoded: consecutive attempts
// of one job share it.
type specCache struct {
	raw  []byte
	spec runSpec
}

func (c *specCache) decode(raw []byte) runSpec {
	if c.raw == nil || !bytes.Equal(raw, c.raw) {
		c.raw, c.spec = raw, decodeRunSpec(raw)
	}
	return c.spec
}

// specFields is the part of a stored job spec (a protocol.Job) that a
// worker reads. The spec is one the agent stored from a command it
// validated; decoding these three fields instead of a whole protocol.Job
// (its schedule, target, retry and labels) takes a fraction of the time
// (BenchmarkDecodeRunSpec): a fire of a periodic job is run from its
// stored spec, so each such attempt paid a whole decode.
type specFields struct {
	Handler string            `json:"handler"`
	Timeout protocol.Duration `json:"timeout"`
	Payload json.RawMessage   `json:"payload"`
}

// decodeRunSpec returns the runSpec of a stored job spec; an empty one
// (no handler: the attempt fails) when it does not decode.
func decodeRunSpec(raw []byte) runSpec {
	var f specFields
	if err := json.Unmarshal(raw, &f); err != nil {
		return runSpec{}
	}
	return runSpec{handler: f.Handler, timeout: f.Timeout, payload: f.Payload}
}

// runOne runs one attempt already marked RUNNING (durably, with its
// running report): handler → FINISHED (submitted; the scheduler learns
// when it is durable).
func (w *worker) runOne(u workUnit, specs *specCache) {
	env := w.env
	it := u.it
	if it.fenced.Load() {
		// Its group lease moved on while it waited for this worker (a
		// prefetched attempt, prefetch.go): dropped unrun and reported
		// fenced, as pump and started drop such an attempt.
		env.mail.post(attemptFenced{it: it})
		return
	}
	e := it.row
	// The spec the run's command carried when the attempt came from it in
	// this process; else the one stored with the attempt.
	var job runSpec
	if it.spec != nil {
		job = *it.spec
	} else {
		job = specs.decode(e.Spec)
	}
	started := env.now()
	ctx := u.ctx
	if job.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, job.timeout.D())
		defer cancel()
	}
	task := handler.Task{JobID: e.JobID, ExecID: e.ExecID, Attempt: e.Attempt, ScheduledAt: e.ScheduledAt,
		Payload: bytes.Clone(job.payload), Epoch: e.Epoch}
	if e.ShardTotal > 0 {
		task.Shard = &protocol.ShardSlot{Index: e.ShardIndex, Total: e.ShardTotal}
	}
	var res retry.Result
	var outcome retry.Outcome
	var hintAfter time.Duration
	if u.ctx.Err() != nil {
		// Cancelled or stopped while it waited for this worker (a
		// prefetched attempt, prefetch.go): not run. The cause decides
		// the outcome below (cancelled, or interrupted by the shutdown).
		res, outcome = retry.Result{Code: -1, Message: "not started", Retryable: true}, retry.OutcomeInterrupted
	} else {
		res, outcome, hintAfter = w.invoke(ctx, job.handler, task)
	}
	// An attempt whose context ended is a timeout, a cancel or a shutdown,
	// whatever the handler returned.
	if outcome != retry.OutcomePanic && ctx.Err() != nil {
		switch cause := context.Cause(ctx); {
		case errors.Is(cause, errCancelled):
			outcome, res = retry.OutcomeCancelled, retry.Result{Code: -1, Message: "cancelled: " + res.Message}
		case errors.Is(cause, errShutdown):
			outcome = retry.OutcomeInterrupted
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			outcome = retry.OutcomeTimeout
			res = retry.Result{Code: -1, Message: fmt.Sprintf("timed out after %s: %s", job.timeout, res.Message), Retryable: true}
		}
	}
	// Retry-After is a hint for the next attempt of a retryable failure only.
	var retryAfter time.Duration
	if outcome == retry.OutcomeFailure && res.Retryable {
		retryAfter = hintAfter
	}
	finished := env.now()
	dur := finished.Sub(started)
	state := store.StateFinished
	kind := protocol.ReportFinished
	if outcome == retry.OutcomeInterrupted {
		state, kind = store.StateInterrupted, protocol.ReportInterrupted
	}
	resJSON, _ := json.Marshal(res)
	r := rowReport(*e, kind)
	r.At = env.reportTime(finished)
	if kind == protocol.ReportFinished {
		rr := res
		r.Outcome, r.Result, r.Duration = outcome, &rr, protocol.Duration(dur)
		r.RetryAfter = protocol.Duration(retryAfter)
	} else {
		r.Reason = "shutdown"
	}
	rep, encErr := env.host.EncodeReport(r)
	env.mail.post(slotFreed{dur: dur})
	env.cfg.Store.Submit(func(tx *store.Tx) error {
		if encErr != nil {
			return encErr
		}
		ok, err := tx.Finish(it.id, state, finished.Round(0), string(outcome), resJSON)
		if err != nil || !ok {
			return err
		}
		return rep.Enqueue(tx)
	}, func(err error) {
		if err != nil {
			env.cfg.Log.Error("record finished", "exec_id", e.ExecID, "err", err)
		} else {
			env.host.KickOutbox()
		}
		env.mail.post(attemptDone{it: it})
	})
	// The one line per execution at info (submitted and dispatched are at
	// debug); logged by the worker, outside the scheduler goroutine.
	if env.cfg.Log.Enabled(context.Background(), slog.LevelInfo) {
		env.cfg.Log.LogAttrs(context.Background(), slog.LevelInfo, "finished", slog.String("job_id", e.JobID),
			slog.String("exec_id", e.ExecID), slog.Int("attempt", e.Attempt), slog.Duration("lag", startLag(it.started, e.ScheduledAt)),
			slog.Duration("waited", it.started.Sub(it.enqueued)), slog.Duration("duration", dur), slog.String("outcome", string(outcome)),
			slog.Int("code", res.Code), slog.Bool("retryable", res.Retryable), slog.Duration("retry_after", retryAfter))
	}
}

// invoke runs the registered handler, recovering a panic with its stack.
// It returns the result's record and outcome (handler.Result.Verdict).
func (w *worker) invoke(ctx context.Context, name string, t handler.Task) (res retry.Result, outcome retry.Outcome, retryAfter time.Duration) {
	defer func() {
		if p := recover(); p != nil {
			stack := debug.Stack()
			if len(stack) > maxStack {
				stack = stack[:maxStack]
			}
			res, outcome, retryAfter = retry.Result{Code: -1, Message: fmt.Sprintf("panic: %v\n%s", p, stack)}, retry.OutcomePanic, 0
		}
	}()
	fn, ok := w.env.cfg.Handlers.Lookup(name)
	if !ok {
		return retry.Result{Code: -1, Message: fmt.Sprintf("%v: %q is not registered on agent %s", ErrNoHandler, name, w.env.cfg.AgentID)},
			retry.OutcomeFailure, 0
	}
	r := fn(ctx, t)
	return r.Record(), r.Verdict(), r.RetryAfter
}
