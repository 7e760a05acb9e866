package retry

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	ok := []Policy{
		{},
		DefaultPolicy(),
		{MaxAttempts: 1},
		{MaxAttempts: MaxAttemptsLimit, Base: time.Second, Max: time.Hour, Jitter: time.Minute, OnTimeout: true},
		{MaxAttempts: 3, Base: time.Second, Max: time.Second},
		{MaxAttempts: 3, Max: MaxDelayLimit, Jitter: MaxDelayLimit},
	}
	for _, p := range ok {
		if err := p.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", p, err)
		}
	}
	bad := []struct {
		p     Policy
		field string
		msg   string
	}{
		{Policy{MaxAttempts: -1}, "retry.max_attempts", "retry.max_attempts: must be between 0 and 1000 (0 and 1 mean no retry), got -1"},
		{Policy{MaxAttempts: 1001}, "retry.max_attempts", ""},
		{Policy{MaxAttempts: math.MaxInt}, "retry.max_attempts", ""},
		{Policy{Base: -time.Second}, "retry.base", "retry.base: must be between 0s and 168h0m0s, got -1s"},
		{Policy{Max: -time.Second}, "retry.max", ""},
		{Policy{Jitter: -1}, "retry.jitter", ""},
		{Policy{Max: MaxDelayLimit + 1}, "retry.max", ""},
		{Policy{Jitter: math.MaxInt64}, "retry.jitter", ""},
		{Policy{Base: 10 * time.Second, Max: 5 * time.Second}, "retry.max", "retry.max: must be >= retry.base (10s), got 5s"},
		{Policy{MaxAttempts: 3, Base: time.Second}, "retry.max", ""},
	}
	for _, tt := range bad {
		err := tt.p.Validate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tt.field || !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("Validate(%+v) = %v, want a %s error wrapping ErrInvalidPolicy", tt.p, err, tt.field)
			continue
		}
		if tt.msg != "" && err.Error() != tt.msg {
			t.Errorf("Error() = %q, want %q", err.Error(), tt.msg)
		}
	}
}

func TestWithDefaults(t *testing.T) {
	tests := []struct{ in, want Policy }{
		{Policy{}, Policy{MaxAttempts: 1, Base: time.Second, Max: 5 * time.Minute}},
		{Policy{MaxAttempts: 3}, Policy{MaxAttempts: 3, Base: time.Second, Max: 5 * time.Minute}},
		{Policy{MaxAttempts: 3, Base: 10 * time.Minute}, Policy{MaxAttempts: 3, Base: 10 * time.Minute, Max: 10 * time.Minute}},
		{Policy{MaxAttempts: 2, Base: 2 * time.Second, Max: 3 * time.Second, Jitter: time.Second, OnTimeout: true},
			Policy{MaxAttempts: 2, Base: 2 * time.Second, Max: 3 * time.Second, Jitter: time.Second, OnTimeout: true}},
	}
	for _, tt := range tests {
		got := tt.in.WithDefaults()
		if got != tt.want {
			t.Errorf("WithDefaults(%+v) = %+v, want %+v", tt.in, got, tt.want)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("WithDefaults(%+v) is invalid: %v", tt.in, err)
		}
	}
}

func fixed(v int64) func(int64) int64 { return func(int64) int64 { return v } }

func TestDelay(t *testing.T) {
	p := Policy{MaxAttempts: 10, Base: time.Second, Max: 10 * time.Second}
	pj := Policy{MaxAttempts: 10, Base: time.Second, Max: 10 * time.Second, Jitter: 500 * time.Millisecond}
	tests := []struct {
		name    string
		p       Policy
		attempt int
		rnd     func(int64) int64
		want    time.Duration
	}{
		{"attempt 1", p, 1, nil, time.Second},
		{"attempt 2", p, 2, nil, 2 * time.Second},
		{"attempt 3", p, 3, nil, 4 * time.Second},
		{"attempt 4", p, 4, nil, 8 * time.Second},
		{"attempt 5 capped", p, 5, nil, 10 * time.Second},
		{"attempt 0 counts as 1", p, 0, nil, time.Second},
		{"negative attempt", p, -5, nil, time.Second},
		{"attempt 63", p, 63, nil, 10 * time.Second},
		{"attempt 64", p, 64, nil, 10 * time.Second},
		{"attempt MaxInt", p, math.MaxInt, nil, 10 * time.Second},
		{"jitter low", pj, 2, fixed(0), 2 * time.Second},
		{"jitter mid", pj, 2, fixed(int64(250 * time.Millisecond)), 2250 * time.Millisecond},
		{"jitter on top of cap", pj, 40, fixed(int64(499 * time.Millisecond)), 10499 * time.Millisecond},
		{"jitter rnd too high is clamped", pj, 1, fixed(math.MaxInt64), 1500*time.Millisecond - 1},
		{"jitter rnd negative is clamped", pj, 1, fixed(-7), time.Second},
		{"nil rnd means no jitter", pj, 1, nil, time.Second},
		{"zero base", Policy{Max: time.Minute}, 5, nil, 0},
		{"base above max is capped", Policy{Base: time.Hour, Max: time.Minute}, 1, nil, time.Minute},
		{"negative fields", Policy{Base: -time.Second, Max: -time.Second, Jitter: -time.Second}, 3, fixed(5), 0},
		{"huge max and jitter saturate", Policy{Base: 1, Max: math.MaxInt64, Jitter: math.MaxInt64}, 200, fixed(math.MaxInt64 - 1), math.MaxInt64},
		{"max int64 base", Policy{Base: math.MaxInt64, Max: math.MaxInt64}, 2, nil, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Delay(tt.attempt, tt.rnd); got != tt.want {
				t.Fatalf("Delay(%d) = %v, want %v", tt.attempt, got, tt.want)
			}
		})
	}
}

func TestDelayRndOnlyCalledWithPositiveJitter(t *testing.T) {
	calls := 0
	rnd := func(n int64) int64 {
		calls++
		if n <= 0 {
			t.Fatalf("rnd called with n = %d", n)
		}
		return n - 1
	}
	Policy{Base: time.Second, Max: time.Second}.Delay(1, rnd)
	if calls != 0 {
		t.Fatalf("rnd called %d times without jitter", calls)
	}
	if d := (Policy{Base: time.Second, Max: time.Second, Jitter: 3}).Delay(1, rnd); calls != 1 || d != time.Second+2 {
		t.Fatalf("Delay = %v after %d calls", d, calls)
	}
}

// satAdd adds non-negative durations, saturating at math.MaxInt64.
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// TestDelayProperties: for random policies and attempts (up to math.MaxInt),
// 0 <= Delay <= Max + Jitter, Delay is non-decreasing in attempt for a fixed
// jitter, and with Jitter > 0 it stays below Max + Jitter.
func TestDelayProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	dur := func() time.Duration {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return time.Duration(rng.Int64N(int64(time.Hour)))
		case 2:
			return time.Duration(rng.Int64())
		default:
			return time.Duration(rng.Int64N(1000))
		}
	}
	for range 200000 {
		p := Policy{Base: dur(), Max: dur(), Jitter: dur()}
		var attempt int
		switch rng.IntN(3) {
		case 0:
			attempt = rng.IntN(70)
		case 1:
			attempt = rng.Int()
		default:
			attempt = math.MaxInt - rng.IntN(3)
		}
		j := rng.Int64N(math.MaxInt64)
		d := p.Delay(attempt, fixed(j))
		if d < 0 || d > satAdd(p.Max, p.Jitter) {
			t.Fatalf("%+v Delay(%d) = %v outside [0, Max+Jitter]", p, attempt, d)
		}
		if p.Jitter > 0 && d == satAdd(p.Max, p.Jitter) && d != math.MaxInt64 {
			t.Fatalf("%+v Delay(%d) = %v reaches Max+Jitter", p, attempt, d)
		}
		if attempt < math.MaxInt {
			if d2 := p.Delay(attempt+1, fixed(j)); d2 < d {
				t.Fatalf("%+v Delay(%d) = %v > Delay(%d) = %v", p, attempt, d, attempt+1, d2)
			}
		}
	}
}

func FuzzDelay(f *testing.F) {
	f.Add(1, int64(time.Second), int64(time.Minute), int64(time.Second), int64(0))
	f.Add(math.MaxInt, int64(1), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64))
	f.Add(64, int64(3), int64(7), int64(0), int64(-1))
	f.Fuzz(func(t *testing.T, attempt int, base, maxd, jitter, r int64) {
		p := Policy{Base: time.Duration(base), Max: time.Duration(maxd), Jitter: time.Duration(jitter)}
		d := p.Delay(attempt, fixed(r))
		limit := satAdd(max(p.Max, 0), max(p.Jitter, 0))
		if d < 0 || d > limit {
			t.Fatalf("%+v Delay(%d) = %v outside [0, %v]", p, attempt, d, limit)
		}
	})
}

func TestDecide(t *testing.T) {
	p := Policy{MaxAttempts: 3, Base: time.Second, Max: time.Minute}
	pt := p
	pt.OnTimeout = true
	retryable := Result{Code: 503, Retryable: true}
	permanent := Result{Code: 400}
	tests := []struct {
		name    string
		p       Policy
		attempt int
		outcome Outcome
		r       Result
		want    Decision
	}{
		{"success", p, 1, OutcomeSuccess, Result{}, Decision{Reason: ReasonSucceeded}},
		{"success ignores retryable", p, 1, OutcomeSuccess, retryable, Decision{Reason: ReasonSucceeded}},
		{"cancelled", p, 1, OutcomeCancelled, retryable, Decision{Reason: ReasonCancelled}},
		{"failure retryable", p, 1, OutcomeFailure, retryable, Decision{Retry: true, Delay: time.Second, Reason: ReasonRetryable}},
		{"failure retryable attempt 2", p, 2, OutcomeFailure, retryable, Decision{Retry: true, Delay: 2 * time.Second, Reason: ReasonRetryable}},
		{"failure retryable exhausted", p, 3, OutcomeFailure, retryable, Decision{Reason: ReasonAttemptsExhausted}},
		{"failure beyond max attempts", p, 9, OutcomeFailure, retryable, Decision{Reason: ReasonAttemptsExhausted}},
		{"failure not retryable", p, 1, OutcomeFailure, permanent, Decision{Reason: ReasonNotRetryable}},
		{"failure default policy", DefaultPolicy(), 1, OutcomeFailure, retryable, Decision{Reason: ReasonAttemptsExhausted}},
		{"failure zero max attempts", Policy{}, 1, OutcomeFailure, retryable, Decision{Reason: ReasonAttemptsExhausted}},
		{"attempt 0 counts as 1", p, 0, OutcomeFailure, retryable, Decision{Retry: true, Delay: time.Second, Reason: ReasonRetryable}},
		{"panic", p, 1, OutcomePanic, Result{Message: "nil map"}, Decision{Reason: ReasonPanic}},
		{"panic marked retryable", p, 1, OutcomePanic, retryable, Decision{Retry: true, Delay: time.Second, Reason: ReasonRetryable}},
		{"timeout without on_timeout", p, 1, OutcomeTimeout, retryable, Decision{Reason: ReasonTimeoutSuspect, Suspect: true}},
		{"timeout with on_timeout", pt, 1, OutcomeTimeout, Result{}, Decision{Retry: true, Delay: time.Second, Reason: ReasonTimeoutRetry, Suspect: true}},
		{"timeout with on_timeout exhausted", pt, 3, OutcomeTimeout, Result{}, Decision{Reason: ReasonAttemptsExhausted, Suspect: true}},
		{"interrupted", p, 1, OutcomeInterrupted, Result{}, Decision{Retry: true, Delay: time.Second, Reason: ReasonInterrupted, Suspect: true}},
		{"interrupted exhausted", p, 3, OutcomeInterrupted, Result{}, Decision{Reason: ReasonAttemptsExhausted, Suspect: true}},
		{"agent lost", p, 2, OutcomeAgentLost, Result{}, Decision{Retry: true, Delay: 2 * time.Second, Reason: ReasonAgentLost, Suspect: true}},
		{"agent lost exhausted", p, 3, OutcomeAgentLost, Result{}, Decision{Reason: ReasonAttemptsExhausted, Suspect: true}},
		{"unknown outcome", p, 1, Outcome("exploded"), retryable, Decision{Reason: ReasonUnknownOutcome, Suspect: true}},
		{"empty outcome", p, 1, "", retryable, Decision{Reason: ReasonUnknownOutcome, Suspect: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Decide(tt.attempt, tt.outcome, tt.r, nil); got != tt.want {
				t.Fatalf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestDecideUsesJitter(t *testing.T) {
	p := Policy{MaxAttempts: 2, Base: time.Second, Max: time.Second, Jitter: time.Second}
	d := p.Decide(1, OutcomeFailure, Result{Retryable: true}, fixed(int64(300*time.Millisecond)))
	if !d.Retry || d.Delay != 1300*time.Millisecond {
		t.Fatalf("Decide = %+v, want retry after 1.3s", d)
	}
}

func TestOutcomeValid(t *testing.T) {
	for _, o := range []Outcome{OutcomeSuccess, OutcomeFailure, OutcomeTimeout, OutcomePanic, OutcomeInterrupted, OutcomeAgentLost, OutcomeCancelled} {
		if !o.Valid() {
			t.Errorf("%q.Valid() = false", o)
		}
	}
	for _, o := range []Outcome{"", "SUCCESS", "ok"} {
		if o.Valid() {
			t.Errorf("%q.Valid() = true", o)
		}
	}
}

func TestClassifyHTTP(t *testing.T) {
	tests := []struct {
		status    int
		retryable bool
		outcome   Outcome
	}{
		{200, false, OutcomeSuccess},
		{204, false, OutcomeSuccess},
		{299, false, OutcomeSuccess},
		{100, false, OutcomeFailure},
		{301, false, OutcomeFailure},
		{400, false, OutcomeFailure},
		{401, false, OutcomeFailure},
		{404, false, OutcomeFailure},
		{408, true, OutcomeFailure},
		{409, false, OutcomeFailure},
		{425, true, OutcomeFailure},
		{429, true, OutcomeFailure},
		{500, true, OutcomeFailure},
		{501, false, OutcomeFailure},
		{502, true, OutcomeFailure},
		{503, true, OutcomeFailure},
		{504, true, OutcomeFailure},
		{505, false, OutcomeFailure},
		{599, true, OutcomeFailure},
		{0, false, OutcomeFailure},
		{600, false, OutcomeFailure},
		{-1, false, OutcomeFailure},
	}
	for _, tt := range tests {
		r := ClassifyHTTP(tt.status)
		if r.Code != tt.status || r.Retryable != tt.retryable {
			t.Errorf("ClassifyHTTP(%d) = %+v, want code %d retryable %v", tt.status, r, tt.status, tt.retryable)
		}
		if (r.Message == "") != (tt.outcome == OutcomeSuccess) {
			t.Errorf("ClassifyHTTP(%d) message %q", tt.status, r.Message)
		}
		if o := HTTPOutcome(tt.status); o != tt.outcome {
			t.Errorf("HTTPOutcome(%d) = %q, want %q", tt.status, o, tt.outcome)
		}
	}
}

func TestClassifyExit(t *testing.T) {
	permanent := []int{2, 64, 78}
	tests := []struct {
		code      int
		retryable bool
		outcome   Outcome
	}{
		{0, false, OutcomeSuccess},
		{1, true, OutcomeFailure},
		{2, false, OutcomeFailure},
		{64, false, OutcomeFailure},
		{75, true, OutcomeFailure},
		{78, false, OutcomeFailure},
		{255, true, OutcomeFailure},
		{-1, true, OutcomeFailure},
	}
	for _, tt := range tests {
		r := ClassifyExit(tt.code, permanent)
		if r.Code != tt.code || r.Retryable != tt.retryable {
			t.Errorf("ClassifyExit(%d) = %+v, want retryable %v", tt.code, r, tt.retryable)
		}
		if o := ExitOutcome(tt.code); o != tt.outcome {
			t.Errorf("ExitOutcome(%d) = %q, want %q", tt.code, o, tt.outcome)
		}
	}
	if r := ClassifyExit(2, nil); !r.Retryable {
		t.Errorf("ClassifyExit(2, nil) = %+v, want retryable", r)
	}
}
