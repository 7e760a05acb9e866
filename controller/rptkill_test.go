package controller

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

const (
	envRptKillDir  = "AX_CTL_RPTKILL_DIR"
	envRptKillPort = "AX_CTL_RPTKILL_PORT"
)

// TestHelperReportKillProcess is not a test: TestKill9LeavesNoAckedReports
// runs the test binary again with it to get a controller (its embedded
// server, file storage) in a process it can SIGKILL. It logs nothing
// unless testutil.LogEnv is set: every report it reads is rejected.
func TestHelperReportKillProcess(t *testing.T) {
	cfg := childConfig(t, envRptKillDir, envRptKillPort, "TestKill9LeavesNoAckedReports")
	cfg.Logger = testutil.Logger()
	cfg.reportSweep = 200 * time.Millisecond
	testutil.RunChild(func(ctx context.Context) error {
		c, err := New(cfg)
		if err != nil {
			return err
		}
		return c.Start(ctx)
	})
}

// TestKill9LeavesNoAckedReports kills a real controller process (embedded
// server and all) with SIGKILL while reports stream into AX_RPT and are
// acknowledged, three times, and checks that once the restarted controller
// has read everything AX_RPT is empty. With report consumers stored in
// files it was not without the upkeep's removal of the reports at or
// below their consumer's ack floor: the server persisted the consumers'
// ack floors and lost some of the work queue's removals (seen without it,
// kills after 1.5 s of about 60,000 reports: 2 such reports left after the
// first kill, 80,292 after the sixth). The consumers now keep their state
// in memory, so the restarted ones deliver those reports again and their
// acknowledgement removes them; the upkeep stays for a replicated
// consumer, whose state another server keeps.
func TestKill9LeavesNoAckedReports(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns controller processes")
	}
	dir, port := t.TempDir(), testutil.FreePort(t)
	url := "nats://127.0.0.1:" + strconv.Itoa(port)
	env := []string{envRptKillDir + "=" + dir, envRptKillPort + "=" + strconv.Itoa(port)}
	start := func() *testutil.Child {
		return testutil.StartChild(t, "TestHelperReportKillProcess", env, 90*time.Second)
	}
	child := start()
	for kill := range 3 {
		sent := floodReports(t, url, func() { child.Kill() })
		child = start()
		t.Logf("kill %d: %d reports published before it; after the restart: %s", kill+1, sent, rptState(t, url))
	}
	var last string
	testutil.EventuallyFunc(t, 60*time.Second, func() string {
		return "AX_RPT empty once every report consumer is idle: " + last
	}, func() bool {
		var empty bool
		last, empty = rptEmpty(t, url)
		return empty
	})
}

// floodReports publishes undecodable reports (read, rejected and
// acknowledged by the controller) on every shard token from four
// connections, calls kill after 1.5 s, and returns how many were
// published (not all stored: the last ones meet the kill).
func floodReports(t *testing.T, url string, kill func()) int64 {
	t.Helper()
	var stop atomic.Bool
	var sent atomic.Int64
	var wg sync.WaitGroup
	for p := range 4 {
		nc, err := nats.Connect(url, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer nc.Close()
			agent := "edge-" + strconv.Itoa(p)
			for i := 0; !stop.Load(); i++ {
				if _, err := js.PublishAsync(protocol.ReportSubject(i%protocol.DefaultShards, agent), []byte("x")); err != nil {
					return // the server is gone
				}
				sent.Add(1)
				if i%256 == 255 {
					select {
					case <-js.PublishAsyncComplete():
					case <-time.After(time.Second):
					}
				}
			}
		}()
	}
	deadline := time.NewTimer(1500 * time.Millisecond)
	defer deadline.Stop()
	<-deadline.C
	kill()
	stop.Store(true)
	wg.Wait()
	return sent.Load()
}

// rptInfo reads AX_RPT's state and its report consumers' infos.
func rptInfo(t *testing.T, url string) (*jetstream.StreamInfo, []*jetstream.ConsumerInfo) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := tctx(t)
	st, err := js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	var cis []*jetstream.ConsumerInfo
	for n := range protocol.DefaultShards {
		cons, err := js.Consumer(ctx, protocol.StreamReports, ingest.ConsumerName(n))
		if err != nil {
			t.Fatal(err)
		}
		cis = append(cis, cons.CachedInfo())
	}
	si, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return si, cis
}

// rptState describes AX_RPT and its consumers.
func rptState(t *testing.T, url string) string {
	si, cis := rptInfo(t, url)
	var b strings.Builder
	fmt.Fprintf(&b, "AX_RPT msgs %d first seq %d last seq %d; consumers (ack floor, pending, ack pending):",
		si.State.Msgs, si.State.FirstSeq, si.State.LastSeq)
	for _, ci := range cis {
		fmt.Fprintf(&b, " %s %d %d %d", ci.Name, ci.AckFloor.Stream, ci.NumPending, ci.NumAckPending)
	}
	return b.String()
}

// rptEmpty reports whether every report consumer is idle (nothing pending
// or unacknowledged) and AX_RPT empty, and describes the state.
func rptEmpty(t *testing.T, url string) (string, bool) {
	si, cis := rptInfo(t, url)
	idle := true
	for _, ci := range cis {
		idle = idle && ci.NumPending == 0 && ci.NumAckPending == 0
	}
	return rptState(t, url), idle && si.State.Msgs == 0
}
