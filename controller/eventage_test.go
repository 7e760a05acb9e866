package controller

import (
	"testing"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// TestEventStreamFollowsRetention: AX_EVT keeps events as long as the
// history keeps an execution (the live grace, reports.dedup_window, then history.retention: the
// history is rebuilt from it); a restart with another retention changes
// the stream's max age.
func TestEventStreamFollowsRetention(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		retention, want time.Duration
	}{
		{3 * 24 * time.Hour, DefaultDedupWindow + 3*24*time.Hour},
		{10 * time.Minute, DefaultDedupWindow + 10*time.Minute},
	} {
		cfg := testConfig(t, dir)
		cfg.History.Retention = tc.retention
		c := startController(t, cfg)
		s, err := c.js.Stream(tctx(t), protocol.StreamEvents)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(tctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if info.Config.MaxAge != tc.want {
			t.Errorf("history.retention %v: AX_EVT max age %v, want %v", tc.retention, info.Config.MaxAge, tc.want)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
