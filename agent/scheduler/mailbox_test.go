package scheduler

import (
	"context"
	"testing"
	"time"
)

// TestStoppedDrainLeavesNotifySet: a drain stopped by the end of Run's
// context puts the messages it did not handle back, and notify is set for
// them (their token was spent on this drain), so the shutdown that waits
// on notify for a batch still being marked RUNNING does not wait forever.
func TestStoppedDrainLeavesNotifySet(t *testing.T) {
	o := newOffline(t, offlineConfig(t, "edge-m"), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	mail := o.s.env.mail
	mail.drop()
	for range 3 {
		mail.post(flushFires{})
	}
	<-mail.notify // the token the Run loop's select takes
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o.s.drainBatch(ctx)
	if n := mail.len(); n != 3 {
		t.Fatalf("%d messages queued after a stopped drain, want the 3 not handled", n)
	}
	select {
	case <-mail.notify:
	default:
		t.Fatal("messages queued after a stopped drain, but notify is not set")
	}
}
