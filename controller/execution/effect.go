package execution

import (
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// Effect is something the controller does after the record Apply returned
// is stored (or, on a refusal, instead of storing anything). Effects are
// values; the controller executes them in order.
type Effect interface {
	effect()
}

// Transition is one state change, for events, metrics and logs.
type Transition struct {
	From, To protocol.State
	Reason   string
}

// Transitioned: the execution made transition T; Snapshot is the record
// right after it (a report standing for several steps makes one per
// step, in order). The controller counts and logs each; the transitions
// of one Apply make one event, published at the last of them.
type Transitioned struct {
	Snapshot Record
	T        Transition
}

// ReplayEvent: a duplicate report's transition, made when it was first
// applied; its event is published again (the stream drops it by Msg-Id if
// it was stored), which closes the gap of a controller that crashed
// between its record write and its events.
type ReplayEvent struct {
	Snapshot Record
	T        Transition
	// End: T was the last transition of the report that made it; the
	// ReplayEvents up to and including it are one event.
	End bool
}

// ScheduleRetry arms the retry timer of Attempt of an execution at At.
type ScheduleRetry struct {
	ExecID, JobID string
	Attempt       int
	At            time.Time
}

// CancelRetry drops the retry timer of an execution.
type CancelRetry struct {
	ExecID string
}

// SendRun sends the run command of Attempt (to the record's agent, under
// its epoch), to run at RunAt. Resend marks a run sent before (an
// existing PENDING execution created again).
type SendRun struct {
	Attempt int
	RunAt   time.Time
	Resend  bool
}

// SendCancel sends a cancel command for attempt Attempt to Agent.
type SendCancel struct {
	Agent, ExecID string
	Attempt       int
	Reason        string
}

// WaitForAgent remembers a PENDING execution without an agent; the next
// agent of its job's group that registers gets it (Place).
type WaitForAgent struct {
	ExecID, JobID string
}

// ForgetWaiting forgets a waiting execution (it no longer waits).
type ForgetWaiting struct {
	ExecID string
}

// Retire removes the record from live state (Expiry): with compare-and-set
// on the revision read, so a record changed meanwhile stays.
type Retire struct {
	ExecID string
}

// Replays returns the events of effs, the effects of a change already
// stored, as ReplayEvents, to publish them again: grouped into events as
// their first publication grouped them (the transitions of one change are
// one event, ending where a transition is not followed by one that leaves
// the state it entered). Effects other than events are left out.
func Replays(effs []Effect) []Effect {
	var out []Effect
	for i, e := range effs {
		switch e := e.(type) {
		case Transitioned:
			out = append(out, ReplayEvent{Snapshot: e.Snapshot, T: e.T, End: !Chained(effs, i)})
		case ReplayEvent:
			out = append(out, e)
		}
	}
	return out
}

// Chained reports whether the transition effs[i] is followed by another
// of the same change: the next transition in effs (past the retry timer's
// effects) is of the same kind (stored, or replayed and not the end of
// the report that made it) and leaves the state effs[i] entered. Their
// events are one.
func Chained(effs []Effect, i int) bool {
	for _, b := range effs[i+1:] {
		switch b := b.(type) {
		case ScheduleRetry, CancelRetry:
			continue
		case Transitioned:
			a, ok := effs[i].(Transitioned)
			return ok && b.T.From == a.T.To
		case ReplayEvent:
			a, ok := effs[i].(ReplayEvent)
			return ok && !a.End && b.T.From == a.T.To
		}
		return false
	}
	return false
}

func (Transitioned) effect()  {}
func (ReplayEvent) effect()   {}
func (ScheduleRetry) effect() {}
func (CancelRetry) effect()   {}
func (SendRun) effect()       {}
func (SendCancel) effect()    {}
func (WaitForAgent) effect()  {}
func (ForgetWaiting) effect() {}
func (Retire) effect()        {}
