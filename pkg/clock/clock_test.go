package clock

import (
	"context"
	"runtime"
	"testing"
	"time"
)

func TestFakeTimersFireWhenDue(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	t1 := f.NewTimer(time.Second)
	t2 := f.NewTimer(3 * time.Second)
	if f.Timers() != 2 {
		t.Fatalf("Timers = %d", f.Timers())
	}
	f.Advance(999 * time.Millisecond)
	select {
	case <-t1.C():
		t.Fatal("fired early")
	default:
	}
	f.Advance(time.Millisecond)
	select {
	case at := <-t1.C():
		if !at.Equal(start.Add(time.Second)) {
			t.Fatalf("fired at %v", at)
		}
	default:
		t.Fatal("did not fire at its deadline")
	}
	if !t2.Stop() {
		t.Fatal("Stop of an armed timer returned false")
	}
	f.Advance(time.Hour)
	select {
	case <-t2.C():
		t.Fatal("stopped timer fired")
	default:
	}
	if t2.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer returned true")
	}
	f.Set(f.Now().Add(time.Second))
	select {
	case <-t2.C():
	default:
		t.Fatal("reset timer did not fire")
	}
	if f.Timers() != 0 {
		t.Fatalf("Timers = %d after all fired", f.Timers())
	}
}

func TestFakeZeroDurationFiresAtOnce(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	tm := f.NewTimer(0)
	select {
	case <-tm.C():
	default:
		t.Fatal("zero timer did not fire")
	}
}

func TestRealClockMoves(t *testing.T) {
	var c Clock = Real{}
	a := c.Now()
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	if !c.Now().After(a) {
		t.Fatal("real clock did not move")
	}
}

// TestSleep: Sleep returns true once the clock passes d, false when ctx
// ends first.
func TestSleep(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	done := make(chan bool, 1)
	go func() { done <- Sleep(context.Background(), f, time.Second) }()
	for deadline := time.Now().Add(10 * time.Second); f.Timers() == 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("Sleep made no timer")
		}
	}
	f.Advance(time.Second)
	if !<-done {
		t.Fatal("Sleep returned false after its duration passed")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, f, time.Hour) {
		t.Fatal("Sleep returned true with its context ended")
	}
}
