package handler

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// TestRegistry: a name is registered once (a second registration, such as
// a program's handler named like a built-in one, is refused with
// ErrDuplicate and leaves the first); Lookup finds what was registered;
// Names is sorted.
func TestRegistry(t *testing.T) {
	r := NewRegistry()
	first := func(context.Context, Task) Result { return Result{Message: "first"} }
	for _, name := range []string{"http", "exec", "noop"} {
		if err := r.Register(name, first); err != nil {
			t.Fatalf("Register(%q): %v", name, err)
		}
	}
	err := r.Register("exec", func(context.Context, Task) Result { return Result{Message: "second"} })
	if !errors.Is(err, ErrDuplicate) {
		t.Fatalf("second Register(exec) = %v, want ErrDuplicate", err)
	}
	fn, ok := r.Lookup("exec")
	if !ok || fn(context.Background(), Task{}).Message != "first" {
		t.Fatal("exec is not the first registration")
	}
	if _, ok := r.Lookup("missing"); ok {
		t.Fatal("Lookup found a name never registered")
	}
	if got, want := r.Names(), []string{"exec", "http", "noop"}; !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
}

// TestResultVerdict: without an Outcome, Code 0 is a success and any
// other code a failure; an explicit Outcome (http's 200) wins.
func TestResultVerdict(t *testing.T) {
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{}, "success"},
		{Result{Code: 1, Retryable: true}, "failure"},
		{Result{Code: 200, Outcome: "success"}, "success"},
		{Result{Code: 0, Outcome: "failure"}, "failure"},
	} {
		if got := tc.r.Verdict(); string(got) != tc.want {
			t.Errorf("%+v: Verdict() = %s, want %s", tc.r, got, tc.want)
		}
		if rec := tc.r.Record(); rec.Code != tc.r.Code || rec.Retryable != tc.r.Retryable {
			t.Errorf("%+v: Record() = %+v", tc.r, rec)
		}
	}
}
