package writemark_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/axsched/ax/controller/writemark"
)

// fakeClock is a settable clock for the tracker's now.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time              { return c.t }
func (c *fakeClock) add(d time.Duration)         { c.t = c.t.Add(d) }
func newTracker(c *fakeClock) *writemark.Tracker { return writemark.New(c.now) }

var t0 = time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)

// TestMarkFollowsOldestOpenOp: the mark is the begin of the oldest op not
// ended, now when none is open; a failed op holds it for good, a held
// effect until it is released.
func TestMarkFollowsOldestOpenOp(t *testing.T) {
	clk := &fakeClock{t: t0}
	tr := newTracker(clk)
	ctx := context.Background()
	if m := tr.Mark(); !m.Through.Equal(t0) || m.Open != 0 {
		t.Fatalf("idle mark %+v, want through %v, 0 open", m, t0)
	}
	_, create := tr.Begin(ctx)
	clk.add(200 * time.Millisecond)
	_, cancel := tr.Begin(ctx)
	clk.add(300 * time.Millisecond)
	if m := tr.Mark(); !m.Through.Equal(t0) || m.Open != 2 {
		t.Fatalf("two open: mark %+v, want through %v", m, t0)
	}
	release := create.Hold()
	create.End()
	if m := tr.Mark(); !m.Through.Equal(t0) {
		t.Fatalf("create ended with an effect held: through %v, want %v", m.Through, t0)
	}
	release(true)
	if m := tr.Mark(); !m.Through.Equal(t0.Add(200*time.Millisecond)) || m.Open != 1 {
		t.Fatalf("create done: mark %+v, want through the cancel's begin", m)
	}
	cancel.Fail()
	cancel.End()
	clk.add(time.Hour)
	if m := tr.Mark(); !m.Through.Equal(t0.Add(200*time.Millisecond)) || m.Failed != 1 {
		t.Fatalf("failed cancel: mark %+v, want it held at the cancel's begin", m)
	}
}

// TestHeldEffectNotStoredFailsTheOp: release(false) pins the op.
func TestHeldEffectNotStoredFailsTheOp(t *testing.T) {
	clk := &fakeClock{t: t0}
	tr := newTracker(clk)
	_, op := tr.Begin(context.Background())
	release := op.Hold()
	op.End()
	release(false)
	release(true) // a second call changes nothing
	clk.add(time.Minute)
	if m := tr.Mark(); !m.Through.Equal(t0) || m.Failed != 1 {
		t.Fatalf("mark %+v, want held at %v with 1 failed", m, t0)
	}
}

// TestNestedOpIsTheOuterOne: Begin inside an op returns it; the inner End
// does not end it, the inner Fail fails it.
func TestNestedOpIsTheOuterOne(t *testing.T) {
	clk := &fakeClock{t: t0}
	tr := newTracker(clk)
	ctx, outer := tr.Begin(context.Background())
	clk.add(time.Second)
	_, inner := tr.Begin(ctx)
	if writemark.From(ctx) != outer {
		t.Fatal("From(ctx) is not the outer op")
	}
	inner.End()
	if m := tr.Mark(); m.Open != 1 || !m.Through.Equal(t0) {
		t.Fatalf("after the inner End: mark %+v, want the outer op open", m)
	}
	inner.Fail()
	outer.End()
	if m := tr.Mark(); m.Failed != 1 {
		t.Fatalf("inner Fail: mark %+v, want the outer op failed", m)
	}
}

// TestBeginRefusedAfterClose: Close refuses every later op.
func TestBeginRefusedAfterClose(t *testing.T) {
	clk := &fakeClock{t: t0}
	tr := newTracker(clk)
	ctx := context.Background()
	_, op := tr.Begin(ctx)
	if op.Refused() != nil {
		t.Fatalf("open tracker: refused %v", op.Refused())
	}
	op.End()
	m, idle := tr.Close()
	if !idle || m.Open != 0 {
		t.Fatalf("close: %+v idle %v, want idle", m, idle)
	}
	_, op = tr.Begin(ctx)
	if !errors.Is(op.Refused(), writemark.ErrClosed) {
		t.Fatalf("closed: refused %v, want ErrClosed", op.Refused())
	}
	op.End() // harmless
	if m := tr.Mark(); m.Open != 0 {
		t.Fatalf("a refused op is open: %+v", m)
	}
}

// TestCloseWithOpenOp: Close is not idle while an op is open, and its
// mark is that op's begin.
func TestCloseWithOpenOp(t *testing.T) {
	clk := &fakeClock{t: t0}
	tr := newTracker(clk)
	_, op := tr.Begin(context.Background())
	clk.add(time.Second)
	m, idle := tr.Close()
	if idle || !m.Through.Equal(t0) {
		t.Fatalf("close with an op open: %+v idle %v, want not idle, through %v", m, idle, t0)
	}
	op.End()
}

// TestUntrackedPins: a write outside any op pins the mark at its time and
// is counted.
func TestUntrackedPins(t *testing.T) {
	clk := &fakeClock{t: t0}
	tr := newTracker(clk)
	tr.Untracked()
	clk.add(time.Minute)
	if m := tr.Mark(); !m.Through.Equal(t0) || tr.UntrackedCount() != 1 {
		t.Fatalf("mark %+v, untracked %d; want through %v and 1", m, tr.UntrackedCount(), t0)
	}
}

// TestNilOpFail: Fail on no op (From of a context without one) does
// nothing, so that a write path outside an op needs no check.
func TestNilOpFail(t *testing.T) {
	op := writemark.From(context.Background())
	if op != nil {
		t.Fatalf("From of a bare context = %v, want nil", op)
	}
	op.Fail()
}

// TestValueRoundTrip: Encode and Decode keep a value and refuse bad ones.
func TestValueRoundTrip(t *testing.T) {
	v := writemark.Value{Node: "ctl-a", Instance: "0a1b2c", Through: t0, Open: 2, Failed: 1, Covered: []int{0, 7}}
	data, err := writemark.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := writemark.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	v.V = writemark.Version
	if !reflect.DeepEqual(got, v) {
		t.Fatalf("decoded %+v, want %+v", got, v)
	}
	for _, bad := range []string{
		`{"v":2,"node":"a","instance":"b","through":"2026-12-02T10:00:00Z"}`,
		`{"v":1,"node":"","instance":"b","through":"2026-12-02T10:00:00Z"}`,
		`{"v":1,"node":"a","instance":"","through":"2026-12-02T10:00:00Z"}`,
		`{"v":1,"node":"a","instance":"b"}`,
		`{"v":1,"node":"a","instance":"b","through":"2026-12-02T10:00:00Z","open":1,"failed":2}`,
		`{"v":1,"node":"a","instance":"b","through":"2026-12-02T10:00:00Z","covered":[3,2]}`,
		`{"v":1,"node":"a","instance":"b","through":"2026-12-02T10:00:00Z","covered":[-1]}`,
		`not json`,
	} {
		if _, err := writemark.Decode([]byte(bad)); err == nil {
			t.Errorf("Decode(%s) = nil error", bad)
		}
	}
}

// TestCover: Cover adds shards once each, in order, and leaves v's own
// list alone.
func TestCover(t *testing.T) {
	v := writemark.Value{Covered: []int{1, 5}}
	got := v.Cover([]int{5, 0, 3})
	if want := []int{0, 1, 3, 5}; !reflect.DeepEqual(got.Covered, want) {
		t.Fatalf("Cover = %v, want %v", got.Covered, want)
	}
	if !reflect.DeepEqual(v.Covered, []int{1, 5}) {
		t.Fatalf("Cover changed its receiver's list: %v", v.Covered)
	}
}

// TestVerifiedRoundTrip: EncodeVerified and DecodeVerified keep a value
// (with and without None; a value stored before None decodes as false)
// and refuse bad ones.
func TestVerifiedRoundTrip(t *testing.T) {
	data, err := writemark.EncodeVerified(writemark.Verified{Through: t0})
	if err != nil {
		t.Fatal(err)
	}
	got, err := writemark.DecodeVerified(data)
	if err != nil || !got.Through.Equal(t0) || got.V != writemark.Version {
		t.Fatalf("DecodeVerified = %+v, %v; want through %v", got, err, t0)
	}
	for _, none := range []bool{false, true} {
		data, err := writemark.EncodeVerified(writemark.Verified{Through: t0, None: none})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := writemark.DecodeVerified(data); err != nil || got.None != none {
			t.Fatalf("DecodeVerified(%s) = %+v, %v; want none %v", data, got, err, none)
		}
	}
	if _, err := writemark.EncodeVerified(writemark.Verified{}); err == nil {
		t.Error("EncodeVerified of a zero through: nil error")
	}
	for _, bad := range []string{`{"v":1}`, `{"v":9,"through":"2026-12-02T10:00:00Z"}`, `[]`} {
		if _, err := writemark.DecodeVerified([]byte(bad)); err == nil {
			t.Errorf("DecodeVerified(%s) = nil error", bad)
		}
	}
}

// FuzzDecodeVerified: DecodeVerified never panics, and what it accepts
// encodes again.
func FuzzDecodeVerified(f *testing.F) {
	f.Add([]byte(`{"v":1,"through":"2026-12-02T10:00:00Z"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := writemark.DecodeVerified(data)
		if err != nil {
			return
		}
		if _, err := writemark.EncodeVerified(v); err != nil {
			t.Fatalf("accepted %q, then EncodeVerified: %v", data, err)
		}
	})
}

// FuzzDecode: Decode never panics, and what it accepts encodes again.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"v":1,"node":"ctl","instance":"ab12","through":"2026-12-02T10:00:00Z","open":1,"failed":0}`))
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := writemark.Decode(data)
		if err != nil {
			return
		}
		if _, err := writemark.Encode(v); err != nil {
			t.Fatalf("accepted %q, then Encode: %v", data, err)
		}
	})
}
