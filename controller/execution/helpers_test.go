package execution

import (
	"errors"
	"time"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// Refusals a controller's AuthorizeCreate may give (tests only).
var (
	errNotAssigned = errors.New("not_assigned")
	errUnknownJob  = errors.New("unknown_job")
)

// sentinels are this package's errors, most specific first.
var sentinels = []error{ErrDuplicate, ErrOldAttempt, ErrOldEpoch, ErrWrongAgent, ErrTerminal, ErrFuture, ErrUnknownExec,
	ErrTransition, ErrInvalid, ErrExists, ErrNoRecord, ErrMovedOn, ErrNotRetryable, ErrNoHolder, ErrNoAgent, ErrNotExpired}

// sentinel returns the sentinel err wraps (the Rejection's own Err when
// it is none of this package's), nil for nil.
func sentinel(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	var r *Rejection
	if errors.As(err, &r) {
		return r.Err
	}
	return err
}

// result is Apply's answer to one report, in the shape the report tests check.
type result struct {
	next   *Record
	steps  []Transitioned
	replay []ReplayEvent
	reject error // the sentinel; nil when applied
	early  bool
	detail string
}

// applyR applies report r to cur through Apply.
func applyR(cur *Record, r protocol.Report, policy func() retry.Policy, rnd func(int64) int64, now time.Time, create func() error) result {
	next, effs, err := Apply(cur, Report{Report: r}, Env{Now: now, Policy: policy, Rand: rnd, AuthorizeCreate: create})
	res := result{next: next, reject: sentinel(err), early: IsEarly(err), detail: DetailOf(err)}
	for _, e := range effs {
		switch e := e.(type) {
		case Transitioned:
			res.steps = append(res.steps, e)
		case ReplayEvent:
			res.replay = append(res.replay, e)
		}
	}
	return res
}
