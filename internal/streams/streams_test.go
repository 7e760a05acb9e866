package streams

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// startJetStream starts a server for the test and returns a JetStream
// context on it and a context of 30s (both end with the test).
func startJetStream(t *testing.T) (jetstream.JetStream, context.Context) {
	t.Helper()
	_, js := natstest.JetStream(t, natstest.Start(t).URL())
	return js, testutil.Context(t, 30*time.Second)
}

func TestEnsureIsIdempotent(t *testing.T) {
	js, ctx := startJetStream(t)

	b, err := Ensure(ctx, js, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Jobs.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, protocol.CommandSubject("edge-7"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	// Again: nothing is lost or reset.
	b, err = Ensure(ctx, js, Config{})
	if err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	if e, err := b.Jobs.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("bucket lost its data: %v", err)
	}
	st, _ := js.Stream(ctx, protocol.StreamCommands)
	info, _ := st.Info(ctx)
	if info.State.Msgs != 1 {
		t.Fatalf("AX_CMD has %d msgs after second Ensure", info.State.Msgs)
	}
	rpt, _ := js.Stream(ctx, protocol.StreamReports)
	rinfo, _ := rpt.Info(ctx)
	if rinfo.Config.Retention != jetstream.WorkQueuePolicy {
		t.Fatalf("AX_RPT retention %v, want work queue", rinfo.Config.Retention)
	}
	ls, _ := b.Leases.Status(ctx)
	if ls.TTL() != DefaultLeaseTTL || ls.History() != 1 {
		t.Fatalf("ax_leases TTL %v history %d", ls.TTL(), ls.History())
	}
	// Report de-duplication by Nats-Msg-Id.
	for i := 0; i < 2; i++ {
		if _, err := js.Publish(ctx, protocol.ReportSubject(0, "edge-7"), []byte("{}"), jetstream.WithMsgID("e/1/triggered")); err != nil {
			t.Fatal(err)
		}
	}
	rinfo, _ = rpt.Info(ctx)
	if rinfo.State.Msgs != 1 {
		t.Fatalf("duplicate report stored: %d msgs", rinfo.State.Msgs)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{Replicas: 7}, {Replicas: -1}, {LeaseTTL: -time.Second},
		{ReportMaxBytes: -1}, {ReportMaxBytes: MinReportMaxBytes - 1}, {ReportMaxAge: -time.Second}, {ReportMaxAge: time.Minute}} {
		if err := c.Validate(); !errors.Is(err, ErrConfig) {
			t.Errorf("Validate(%+v) = %v, want ErrConfig", c, err)
		}
	}
}

// TestReportStreamBounded: AX_RPT is bounded in bytes and age and, when
// full, refuses new reports (the publisher gets an error and keeps its
// report) rather than dropping stored ones. A stream made without bounds
// by an earlier version gets them from Ensure.
func TestReportStreamBounded(t *testing.T) {
	js, ctx := startJetStream(t)

	// An AX_RPT as an earlier version made it: no bounds, discard old.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: protocol.StreamReports, Subjects: []string{protocol.SubjectReportsAll},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(ctx, js, Config{ReportMaxBytes: MinReportMaxBytes, ReportMaxAge: 2 * time.Hour}); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if cfg.MaxBytes != MinReportMaxBytes || cfg.MaxAge != 2*time.Hour || cfg.Discard != jetstream.DiscardNew {
		t.Fatalf("AX_RPT max_bytes %d max_age %s discard %v; want %d, 2h, new", cfg.MaxBytes, cfg.MaxAge, cfg.Discard, MinReportMaxBytes)
	}
	// Fill it: the first report past the bound is refused, none is lost.
	body := make([]byte, 32<<10)
	accepted := 0
	var refused error
	for i := 0; refused == nil && i < 100; i++ {
		_, err := js.Publish(ctx, protocol.ReportSubject(0, "edge-7"), body, jetstream.WithMsgID("r/"+strconv.Itoa(i)))
		if err != nil {
			refused = err
			break
		}
		accepted++
	}
	if refused == nil {
		t.Fatalf("100 reports of 32 KiB accepted by a 1 MiB stream")
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if int(info.State.Msgs) != accepted || info.State.FirstSeq != 1 {
		t.Fatalf("stream holds %d reports from seq %d, %d were accepted: an accepted report was dropped", info.State.Msgs, info.State.FirstSeq, accepted)
	}
	t.Logf("%d reports accepted, then: %v", accepted, refused)
	// Defaults apply when the config leaves them out.
	d := streamConfig(t, Config{}, protocol.StreamReports)
	if d.MaxBytes != DefaultReportMaxBytes || d.MaxAge != DefaultReportMaxAge || d.Discard != jetstream.DiscardNew {
		t.Fatalf("default AX_RPT bounds: %d, %s, %v", d.MaxBytes, d.MaxAge, d.Discard)
	}
}

// TestControllerDuplicates: the de-duplication window of AX_EVT is
// ControllerDuplicates (DefaultControllerDuplicates when 0) but never
// longer than Duplicates, which AX_RPT keeps; AX_CMD's is always
// CommandDuplicates, the server's least; a negative ControllerDuplicates is
// refused, naming it.
func TestControllerDuplicates(t *testing.T) {
	window := func(c Config, name string) time.Duration {
		for _, sc := range c.StreamConfigs() {
			if sc.Name == name {
				return sc.Duplicates
			}
		}
		t.Fatalf("no stream %s", name)
		return 0
	}
	for _, tc := range []struct {
		cfg               Config
		evt, cmd, reports time.Duration
	}{
		{Config{}, DefaultControllerDuplicates, CommandDuplicates, DefaultDuplicates},
		{Config{Duplicates: 10 * time.Minute}, DefaultControllerDuplicates, CommandDuplicates, 10 * time.Minute},
		{Config{Duplicates: time.Minute}, time.Minute, CommandDuplicates, time.Minute},
		{Config{ControllerDuplicates: 5 * time.Minute}, 5 * time.Minute, CommandDuplicates, DefaultDuplicates},
		{Config{Duplicates: time.Hour, ControllerDuplicates: 3 * time.Hour}, time.Hour, CommandDuplicates, time.Hour},
	} {
		if g := window(tc.cfg, protocol.StreamEvents); g != tc.evt {
			t.Errorf("%+v: AX_EVT duplicates %v, want %v", tc.cfg, g, tc.evt)
		}
		if g := window(tc.cfg, protocol.StreamCommands); g != tc.cmd {
			t.Errorf("%+v: AX_CMD duplicates %v, want %v", tc.cfg, g, tc.cmd)
		}
		if g := window(tc.cfg, protocol.StreamReports); g != tc.reports {
			t.Errorf("%+v: AX_RPT duplicates %v, want %v", tc.cfg, g, tc.reports)
		}
	}
	err := Config{ControllerDuplicates: -time.Second}.Validate()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "controller_duplicates") {
		t.Fatalf("Validate of a negative ControllerDuplicates = %v, want ErrConfig naming controller_duplicates", err)
	}
}

// TestBucketsKeepTheLeastDuplicateWindow: every bucket's stream has the
// server's least de-duplication window, after a first Ensure and after a
// second (nats.go's CreateOrUpdateKeyValue sets 2 minutes, or the TTL,
// each time), so that a start does not read back the values written in
// the last 2 minutes.
func TestBucketsKeepTheLeastDuplicateWindow(t *testing.T) {
	js, ctx := startJetStream(t)
	for round := 1; round <= 2; round++ {
		if _, err := Ensure(ctx, js, Config{}); err != nil {
			t.Fatalf("Ensure %d: %v", round, err)
		}
		for _, kc := range (Config{}).KVConfigs() {
			st, err := js.Stream(ctx, KVStream(kc.Bucket))
			if err != nil {
				t.Fatal(err)
			}
			if d := st.CachedInfo().Config.Duplicates; d != KVDuplicates {
				t.Errorf("Ensure %d: %s duplicate window %v, want %v", round, kc.Bucket, d, KVDuplicates)
			}
		}
	}
}

// TestCommandStreamKeepsTheLeastDuplicateWindow: Ensure gives AX_CMD the
// server's least de-duplication window, also when an earlier version made
// it with 2 minutes; a run command published twice within the old window
// is then stored twice (its agent stores the attempt once), and the
// stream keeps no Msg-Id to read back at a start.
func TestCommandStreamKeepsTheLeastDuplicateWindow(t *testing.T) {
	js, ctx := startJetStream(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: protocol.StreamCommands, Subjects: []string{protocol.SubjectCommandsAll},
		Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(ctx, js, Config{}); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, protocol.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	if d := st.CachedInfo().Config.Duplicates; d != CommandDuplicates {
		t.Fatalf("AX_CMD duplicate window %v after Ensure, want %v", d, CommandDuplicates)
	}
	id := protocol.RunMsgID("x", 1, "edge-1", 0)
	var seqs []uint64
	for range 2 {
		// Past the window, measured on the server's clock: polled, not slept.
		var ack *jetstream.PubAck
		deadline := time.Now().Add(10 * time.Second)
		for {
			ack, err = js.Publish(ctx, protocol.CommandSubject("edge-1"), []byte("{}"), jetstream.WithMsgID(id))
			if err != nil {
				t.Fatal(err)
			}
			if !ack.Duplicate || time.Now().After(deadline) {
				break
			}
		}
		if ack.Duplicate {
			t.Fatalf("the same Msg-Id still dropped as a duplicate after 10 s")
		}
		seqs = append(seqs, ack.Sequence)
	}
	if seqs[0] == seqs[1] {
		t.Fatalf("both publishes stored at %d", seqs[0])
	}
}

// TestIdemKey: the key of an idempotency key in ax_idem is the hex SHA-256
// of the key.
func TestIdemKey(t *testing.T) {
	if got, want := IdemKey("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"; got != want {
		t.Errorf("IdemKey(abc) = %s, want %s", got, want)
	}
}

// TestReportStreamTakesReadTokensOnly: AX_RPT takes the report subjects of
// the shard tokens a report consumer reads (0 .. max(ReportShards,
// DefaultShards)-1), also when an earlier version made it with every
// ax.rpt subject: a report on another token (an enrolled agent may
// publish on ax.rpt.<any token>.<itself>) is stored nowhere, and its
// publisher learns it at once. ReportShards beyond MaxShards is refused,
// naming it.
func TestReportStreamTakesReadTokensOnly(t *testing.T) {
	js, ctx := startJetStream(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: protocol.StreamReports, Subjects: []string{protocol.SubjectReportsAll},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		shards        int
		stored, other []string
	}{
		{0, []string{"0", "15"}, []string{"16", "1023", "99999", "x"}},
		{32, []string{"0", "31"}, []string{"32", "x"}},
	} {
		if _, err := Ensure(ctx, js, Config{ReportShards: tc.shards}); err != nil {
			t.Fatal(err)
		}
		for _, tok := range tc.stored {
			if _, err := js.Publish(ctx, "ax.rpt."+tok+".edge-7", []byte("{}")); err != nil {
				t.Errorf("shards %d: report on token %s: %v, want stored", tc.shards, tok, err)
			}
		}
		for _, tok := range tc.other {
			if _, err := js.Publish(ctx, "ax.rpt."+tok+".edge-7", []byte("{}")); !errors.Is(err, jetstream.ErrNoStreamResponse) {
				t.Errorf("shards %d: report on token %s: %v, want no stream (stored nowhere)", tc.shards, tok, err)
			}
		}
	}
	st, err := js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Msgs; n != 4 {
		t.Fatalf("AX_RPT holds %d reports, want the 4 on read tokens", n)
	}
	if err := (Config{ReportShards: protocol.MaxShards + 1}).Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "report_shards") {
		t.Fatalf("report_shards beyond MaxShards: %v", err)
	}
}

// TestReportStreamBoundPerSubject: AX_RPT bounds the reports of one
// subject (one agent and shard) and refuses past it (DiscardNewPerSubject);
// the bound is derived from the byte bound unless given, and an AX_RPT made
// without it gets it from Ensure.
func TestReportStreamBoundPerSubject(t *testing.T) {
	for _, tc := range []struct {
		maxBytes int64
		shards   int
		want     int64
	}{
		{DefaultReportMaxBytes, 16, 256},
		{4 << 30, 16, 1024},
		{DefaultReportMaxBytes, 64, MinReportMaxPerSubject},
		{MinReportMaxBytes, 16, MinReportMaxPerSubject},
	} {
		if got := DefaultReportMaxPerSubject(tc.maxBytes, tc.shards); got != tc.want {
			t.Errorf("DefaultReportMaxPerSubject(%d, %d) = %d, want %d", tc.maxBytes, tc.shards, got, tc.want)
		}
	}
	if err := (Config{ReportMaxPerSubject: MinReportMaxPerSubject - 1}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("ReportMaxPerSubject %d: %v, want ErrConfig", MinReportMaxPerSubject-1, err)
	}

	js, ctx := startJetStream(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: protocol.StreamReports, Subjects: []string{protocol.SubjectReportsAll},
		Retention: jetstream.WorkQueuePolicy, Discard: jetstream.DiscardNew}); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(ctx, js, Config{}); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := st.CachedInfo().Config; cfg.MaxMsgsPerSubject != 256 || !cfg.DiscardNewPerSubject {
		t.Fatalf("AX_RPT max_msgs_per_subject %d discard_new_per_subject %v, want 256, true", cfg.MaxMsgsPerSubject, cfg.DiscardNewPerSubject)
	}
	if _, err := Ensure(ctx, js, Config{ReportMaxPerSubject: MinReportMaxPerSubject}); err != nil {
		t.Fatal(err)
	}
	for i := range MinReportMaxPerSubject {
		if _, err := js.Publish(ctx, protocol.ReportSubject(1, "edge-7"), []byte("r"), jetstream.WithMsgID("a/"+strconv.Itoa(i))); err != nil {
			t.Fatalf("report %d of %d: %v", i+1, MinReportMaxPerSubject, err)
		}
	}
	if _, err := js.Publish(ctx, protocol.ReportSubject(1, "edge-7"), []byte("r"), jetstream.WithMsgID("a/over")); err == nil {
		t.Fatalf("report %d of one subject taken", MinReportMaxPerSubject+1)
	}
	if _, err := js.Publish(ctx, protocol.ReportSubject(2, "edge-7"), []byte("r"), jetstream.WithMsgID("b/1")); err != nil {
		t.Fatalf("the same agent's report of another shard: %v", err)
	}
	if _, err := js.Publish(ctx, protocol.ReportSubject(1, "edge-8"), []byte("r"), jetstream.WithMsgID("c/1")); err != nil {
		t.Fatalf("another agent's report of the same shard: %v", err)
	}
}

// streamConfig returns the config c.StreamConfigs gives the stream name.
func streamConfig(tb testing.TB, c Config, name string) jetstream.StreamConfig {
	tb.Helper()
	for _, sc := range c.StreamConfigs() {
		if sc.Name == name {
			return sc
		}
	}
	tb.Fatalf("no stream %s in StreamConfigs", name)
	return jetstream.StreamConfig{}
}

// TestEnsureLeavesAppliedConfigAlone: an Ensure with the settings the last
// one applied asks the server for no update; one with other settings
// updates the streams they change, and only those; a stream an earlier
// version of ax made (no ConfigKey) is updated once, keeping AX_RPT's
// shard count.
func TestEnsureLeavesAppliedConfigAlone(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.JetStream(t, srv.URL())
	ctx := testutil.Context(t, 30*time.Second)
	// AX_RPT as an earlier version left it: no digest, a shard count.
	old := streamConfig(t, Config{}, protocol.StreamReports)
	old.Metadata = map[string]string{ReportShardsKey: "16"}
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	updates := countUpdates(t, srv)
	if _, err := Ensure(ctx, js, Config{}); err != nil {
		t.Fatal(err)
	}
	if n := updates(9); n != 9 {
		// AX_RPT once; the 8 buckets once each (created, then given the
		// least window); AX_CMD and AX_EVT are created, not updated.
		t.Fatalf("first Ensure made %d stream updates, want 9", n)
	}
	rpt, err := js.Stream(ctx, protocol.StreamReports)
	if err != nil {
		t.Fatal(err)
	}
	if md := rpt.CachedInfo().Config.Metadata; md[ReportShardsKey] != "16" || md[ConfigKey] == "" {
		t.Fatalf("AX_RPT metadata after Ensure %v, want the shard count kept and %s set", md, ConfigKey)
	}

	updates = countUpdates(t, srv)
	b, err := Ensure(ctx, js, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if n := updates(0); n != 0 {
		t.Fatalf("Ensure with the settings applied made %d stream updates, want 0", n)
	}
	if _, err := b.Execs.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("bucket bound without an update does not take a write: %v", err)
	}

	// Other settings: the history's age (AX_EVT) and the lease TTL
	// (ax_leases) change, nothing else.
	changed := Config{EventMaxAge: time.Hour, LeaseTTL: 7 * time.Second}
	updates = countUpdates(t, srv)
	if _, err := Ensure(ctx, js, changed); err != nil {
		t.Fatal(err)
	}
	if n := updates(3); n != 3 {
		t.Fatalf("Ensure with a new event age and lease TTL made %d stream updates, want 3 (AX_EVT once, ax_leases twice)", n)
	}
	if sc := streamConfig(t, changed, protocol.StreamEvents); sc.MaxAge != time.Hour {
		t.Fatalf("config of the test: AX_EVT MaxAge %v", sc.MaxAge)
	}
	evt, err := js.Stream(ctx, protocol.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	if got := evt.CachedInfo().Config.MaxAge; got != time.Hour {
		t.Fatalf("AX_EVT MaxAge %v after Ensure with EventMaxAge 1h", got)
	}
	leases, err := js.Stream(ctx, KVStream(protocol.BucketLeases))
	if err != nil {
		t.Fatal(err)
	}
	if got := leases.CachedInfo().Config.MaxAge; got != 7*time.Second {
		t.Fatalf("ax_leases MaxAge %v after Ensure with LeaseTTL 7s", got)
	}
}

// countUpdates counts the stream-updated advisories srv sends from now
// on; the returned func returns the count once it has reached want (or
// after 10 s). The server sends an advisory through its internal send
// queue after it answered the update, so a flush does not wait for it: a
// loaded machine read 8 of a first Ensure's 9.
func countUpdates(tb testing.TB, srv *natstest.Server) func(want int) int {
	tb.Helper()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	var n atomic.Int64
	if _, err := nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.UPDATED.>", func(*nats.Msg) { n.Add(1) }); err != nil {
		tb.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		tb.Fatal(err)
	}
	return func(want int) int {
		deadline := time.Now().Add(10 * time.Second)
		for int(n.Load()) < want && time.Now().Before(deadline) {
			if err := nc.Flush(); err != nil {
				tb.Fatal(err)
			}
		}
		// A round trip more, for an advisory beyond want sent meanwhile.
		if err := nc.Flush(); err != nil {
			tb.Fatal(err)
		}
		return int(n.Load())
	}
}
