package execution

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// eventBytes is how many input bytes one event of FuzzApplySequence takes.
const eventBytes = 6

var fuzzAgents = []string{"a1", "a2", "a3"}

var fuzzSteps = []protocol.ReportKind{protocol.ReportTriggered, protocol.ReportRunning, protocol.ReportFinished,
	protocol.ReportInterrupted, protocol.ReportSkipped, protocol.ReportFenced}

var fuzzOutcomes = []retry.Outcome{retry.OutcomeSuccess, retry.OutcomeFailure, retry.OutcomeTimeout, retry.OutcomeCancelled}

// decodeEvent makes an event of six bytes, relative to the record cur (so
// that random input reaches deep states): b[0] the kind (reports weighted
// up), b[1] the agent, b[2] the attempt (cur's -1 .. +2), b[3] the epoch
// (cur's -1 .. +1), b[4] the report step, outcome and retryable, b[5] the
// clock step and whether a report stands for its earlier steps too.
func decodeEvent(b []byte, cur *Record, now time.Time) Event {
	agent := fuzzAgents[int(b[1])%len(fuzzAgents)]
	attempt, epoch := 1, uint64(0)
	if cur != nil {
		attempt, epoch = cur.Attempt, cur.Epoch
	}
	attempt = max(attempt+int(b[2]%4)-1, 1)
	epoch = uint64(max(int64(epoch)+int64(b[3]%3)-1, 0))
	id := protocol.ExecID(tJob, tNow)
	switch b[0] % 12 {
	case 0:
		return Create{ExecID: id, JobID: tJob, Agent: agent, ScheduledAt: tNow}
	case 1:
		return Place{Agent: agent}
	case 2:
		return RetryDue{Attempt: attempt, GroupAny: b[4]&1 == 1, Held: b[4]&2 == 2, Holder: agent, HolderEpoch: epoch}
	case 3:
		return OperatorRetry{}
	case 4:
		return OperatorCancel{}
	case 5:
		return AgentLost{NewAgent: agent, Epoch: epoch + 1}
	case 6:
		return JobDeleted{Attempt: attempt, Unsent: b[4]&1 == 1}
	case 7:
		return Expiry{Grace: time.Duration(b[4]) * time.Minute}
	}
	k := fuzzSteps[int(b[4])%len(fuzzSteps)]
	r := protocol.Report{V: protocol.Version, Agent: agent, JobID: tJob, ExecID: id, Attempt: attempt, Kind: k,
		ScheduledAt: tNow, At: now, Epoch: epoch, Reason: "fuzz"}
	if k == protocol.ReportFinished {
		r.Outcome = fuzzOutcomes[int(b[4]/8)%len(fuzzOutcomes)]
		r.Result = &retry.Result{Retryable: b[4]&0x80 != 0}
	}
	if b[5]&1 == 1 && k != protocol.ReportTriggered && k != protocol.ReportSkipped && k != protocol.ReportFenced {
		r.TriggeredAt = now
		if b[5]&2 == 2 && k != protocol.ReportRunning {
			r.StartedAt = now
		}
	}
	return Report{Report: r}
}

// FuzzApplySequence decodes its input into a sequence of events (a header
// byte for the retry policy, then eventBytes per event), applies them in
// turn from no record, and checks after every one:
//   - a refused event is a *Rejection of a sentinel, gives no record, and
//     leaves the record it was given as it was (so does an accepted one);
//   - terminal is final: a terminal record changes only by an operator's
//     retry of a FAILED one (to RETRY_WAITING);
//   - attempts never decrease;
//   - one agent per attempt: an attempt seen TRIGGERED or RUNNING on an
//     agent is never seen so on another;
//   - every transition effect is an edge of the table, from the record's
//     state, and the record written is in the state of the last one;
//   - Ends marks the last applied step and no step beyond Applied, and the
//     events a duplicate replays end at the end of a report.
func FuzzApplySequence(f *testing.F) {
	f.Add([]byte{2, 0, 0, 1, 1, 0, 0, 8, 0, 1, 1, 0, 0, 8, 0, 1, 1, 1, 0, 8, 0, 1, 1, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		pol := retry.Policy{MaxAttempts: int(data[0]%4) + 1, Base: time.Second, Max: time.Minute}
		env := Env{Policy: func() retry.Policy { return pol }, Rand: func(n int64) int64 { return n / 2 }}
		data = data[1:]
		now := tNow
		var rec *Record
		ranOn := map[int]string{}
		for i := 0; i+eventBytes <= len(data) && i < 64*eventBytes; i += eventBytes {
			b := data[i : i+eventBytes]
			now = now.Add(time.Duration(b[5]) * time.Second)
			env.Now = now
			ev := decodeEvent(b, rec, now)
			before := rec.Clone()
			next, effs, err := Apply(rec, ev, env)
			if !reflect.DeepEqual(rec, before) {
				t.Fatalf("event %d %#v changed its input record", i/eventBytes, ev)
			}
			if err != nil {
				var rej *Rejection
				if !errors.As(err, &rej) || sentinel(err) == nil || next != nil {
					t.Fatalf("event %d %#v: refusal %v (record %v), want a *Rejection and no record", i/eventBytes, ev, err, next)
				}
				var lastReplay *ReplayEvent
				for _, e := range effs {
					if re, ok := e.(ReplayEvent); ok {
						lastReplay = &re
					}
				}
				if lastReplay != nil && !lastReplay.End {
					t.Fatalf("event %d %#v: replay %#v does not end a report's event", i/eventBytes, ev, *lastReplay)
				}
				continue
			}
			if next == nil {
				continue
			}
			if before != nil {
				if before.State.Terminal() && !(before.State == protocol.StateFailed && ev.Kind() == KindOperatorRetry && next.State == protocol.StateRetryWaiting) {
					t.Fatalf("event %d %#v changed terminal %s to %s", i/eventBytes, ev, before.State, next.State)
				}
				if next.Attempt < before.Attempt {
					t.Fatalf("event %d %#v: attempt %d → %d", i/eventBytes, ev, before.Attempt, next.Attempt)
				}
			}
			from := StateNone
			if before != nil {
				from = before.State
			}
			last := from
			for _, e := range effs {
				tr, ok := e.(Transitioned)
				if !ok {
					continue
				}
				if tr.T.From != last {
					t.Fatalf("event %d %#v: transition from %s, record was %s", i/eventBytes, ev, tr.T.From, last)
				}
				if err := CheckTransition(tr.T.From, tr.T.To); err != nil {
					t.Fatalf("event %d %#v: %v", i/eventBytes, ev, err)
				}
				last = tr.T.To
				if s := tr.Snapshot.State; s == protocol.StateTriggered || s == protocol.StateRunning {
					if a, ok := ranOn[tr.Snapshot.Attempt]; ok && a != tr.Snapshot.Agent {
						t.Fatalf("event %d %#v: attempt %d ran on %s, now %s on %s", i/eventBytes, ev, tr.Snapshot.Attempt, a, s, tr.Snapshot.Agent)
					}
					ranOn[tr.Snapshot.Attempt] = tr.Snapshot.Agent
				}
			}
			if last != next.State {
				t.Fatalf("event %d %#v: record %s after transitions to %s", i/eventBytes, ev, next.State, last)
			}
			if n := len(next.Applied); n > 0 && (next.Ends>>n != 0 || next.Ends&(1<<(n-1)) == 0) {
				t.Fatalf("event %d %#v: ends %b for applied %v", i/eventBytes, ev, next.Ends, next.Applied)
			}
			rec = next
		}
	})
}
