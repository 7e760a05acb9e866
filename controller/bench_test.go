package controller

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/controller/execution"
	"github.com/axsched/ax/controller/ingest"
	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// BenchmarkReportsApplied measures how fast the controller applies agent
// reports to the state machine (KV compare-and-set write, events, ack),
// with the embedded server and its file store. One benchmark op is one
// execution of a periodic fire, published into AX_RPT with its Msg-Ids;
// the clock stops when every step is applied.
//
//   - triples: three reports per execution (triggered, running, finished
//     success); reports/s is the raw report rate.
//   - coalesced: one finished report per execution standing for all three
//     steps (TriggeredAt, StartedAt set), as an agent whose outbox still
//     held them sends it.
//
// execs/s is the rate of fully applied executions in both.
//
// The -nkeys variants run with nats.auth: nkeys: the test agent connects
// with its enrolled key (its own account; reports and PubAcks cross a
// service import).
func BenchmarkReportsApplied(b *testing.B) {
	b.Run("triples", func(b *testing.B) { benchReports(b, false, false) })
	b.Run("coalesced", func(b *testing.B) { benchReports(b, true, false) })
	b.Run("triples-nkeys", func(b *testing.B) { benchReports(b, false, true) })
	b.Run("coalesced-nkeys", func(b *testing.B) { benchReports(b, true, true) })
}

func benchReports(b *testing.B, coalesced, nkeys bool) {
	cfg := testConfig(b, b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.AckWait = DefaultAckWait
	// One test agent publishes every report at once, up to 3 × b.N on
	// its 16 subjects: the bound per subject (an agent's outbox waits
	// and publishes again) would refuse most of them.
	cfg.Reports.MaxPerSubject = 1 << 40
	if nkeys {
		cfg.NATS.Auth = auth.ModeNKeys
	}
	c := startController(b, cfg)
	ctx := context.Background()
	var creds []nats.Option
	if nkeys {
		en, err := c.EnrollAgent(ctx, "bench", auth.EnrollRequest{})
		if err != nil {
			b.Fatal(err)
		}
		seed := filepath.Join(b.TempDir(), "bench.nk")
		if err := auth.WriteSecretFile(seed, auth.SeedFile("bench", []byte(en.Seed))); err != nil {
			b.Fatal(err)
		}
		opt, err := nats.NkeyOptionFromSeed(seed)
		if err != nil {
			b.Fatal(err)
		}
		creds = append(creds, opt)
	}
	a := newTestAgent(b, c.NATSURL(), "bench", nil, creds...)
	a.register()
	const jobs = 64
	var ids []protocol.Job
	for range jobs {
		j, err := c.CreateJob(ctx, everyJob("bench", "1s"))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, j)
	}
	type msg struct {
		subj, id string
		data     []byte
	}
	perExec := 3
	if coalesced {
		perExec = 1
	}
	msgs := make([]msg, 0, perExec*b.N)
	now := time.Now()
	for i := range b.N {
		j := ids[i%jobs]
		at := j.CreatedAt.Add(time.Duration(i/jobs+1) * time.Second)
		id := protocol.ExecID(j.ID, at)
		fin := finished(a.rep(j.ID, id, 1, protocol.ReportFinished, at), retry.OutcomeSuccess, ok, time.Millisecond)
		reps := []protocol.Report{
			a.rep(j.ID, id, 1, protocol.ReportTriggered, at),
			a.rep(j.ID, id, 1, protocol.ReportRunning, at),
			fin,
		}
		if coalesced {
			fin.TriggeredAt, fin.StartedAt = now, now
			reps = []protocol.Report{fin}
		}
		for _, r := range reps {
			r.At = now
			data, err := protocol.Encode(r)
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, msg{subj: protocol.ReportSubject(protocol.Shard(j.ID, a.shards), a.id), id: r.MsgID(), data: data})
		}
	}
	base := c.m.applied.Load()
	b.ResetTimer()
	cpu0 := processCPU(b)
	start := time.Now()
	var refused atomic.Int64
	js, err := jetstream.New(a.nc, jetstream.WithPublishAsyncMaxPending(1024),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { refused.Add(1) }))
	if err != nil {
		b.Fatal(err)
	}
	for i, m := range msgs {
		if i%1000 == 999 {
			<-js.PublishAsyncComplete()
		}
		if _, err := js.PublishAsync(m.subj, m.data, jetstream.WithMsgID(m.id)); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publish did not complete")
	}
	if n := refused.Load(); n > 0 {
		b.Fatalf("%d of %d reports refused by AX_RPT", n, len(msgs))
	}
	b.Logf("published %d in %v; applied so far %d", len(msgs), time.Since(start), c.m.applied.Load()-base)
	want := base + int64(3*b.N)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(5 * time.Minute)
	for c.m.applied.Load() < want {
		if time.Now().After(deadline) {
			b.Fatalf("applied %d of %d steps", c.m.applied.Load()-base, 3*b.N)
		}
		<-tick.C
	}
	elapsed := time.Since(start)
	cpu := processCPU(b) - cpu0
	b.StopTimer()
	// Redeliveries (a message buffered longer than the ack wait) are
	// harmless duplicates; anything else rejected is a bug.
	dups := testutil.MetricValue(b, c.m.reportsRejected.WithLabelValues(ingest.RejectDuplicate))
	if r := float64(c.m.rejected.Load()) - dups; r != 0 {
		b.Fatalf("%v reports rejected other than duplicates", r)
	}
	b.ReportMetric(dups, "redelivered")
	b.ReportMetric(float64(len(msgs))/elapsed.Seconds(), "reports/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "execs/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/exec")
}

// processCPU returns the CPU time (user + system) this process used so
// far: the whole process (controller, embedded server, the publishing test
// agent), a figure that depends less on the load of a shared machine than
// the wall-clock rates.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReportChecks measures, in process, what report authorization
// adds to the controller's work per report (ingest/reportauth.go), next to the
// work every report had before: decoding it and applying it to its record.
//
//   - decode+apply: protocol.DecodeReport and execution.Apply of a finished
//     report standing for its three steps (a coalesced periodic fire);
//   - checks-pinned: the shard check and the create check of that report
//     (a pinned job, epoch 0);
//   - checks-group: the shard, epoch-holder and create checks of a group
//     job's report under the current epoch.
func BenchmarkReportChecks(b *testing.B) {
	cfg := testConfig(b, b.TempDir())
	cfg.Logger = slog.New(slog.DiscardHandler)
	c := startController(b, cfg)
	ctx := context.Background()
	pinned, err := c.CreateJob(ctx, everyJob("bench", "1h"))
	if err != nil {
		b.Fatal(err)
	}
	group, err := c.CreateJob(ctx, protocol.Job{Name: "g", Handler: "noop", Schedule: schedule.Spec{Every: "1h"},
		Target: protocol.Target{Group: "site=b"}})
	if err != nil {
		b.Fatal(err)
	}
	const epoch = 7
	for i := range lease.MaxEpochGrants {
		if _, _, err := c.groups.RecordGrant(ctx, group.ID, "bench", uint64(i+1)); err != nil {
			b.Fatal(err)
		}
	}
	now := time.Now().UTC()
	mk := func(j protocol.Job, e uint64) (protocol.Report, []byte, string) {
		id := protocol.ExecID(j.ID, now.Truncate(time.Millisecond))
		r := protocol.Report{V: protocol.Version, Agent: "bench", JobID: j.ID, ExecID: id, Attempt: 1, Kind: protocol.ReportFinished,
			ScheduledAt: now, At: now, TriggeredAt: now, StartedAt: now, Epoch: e, Outcome: retry.OutcomeSuccess, Result: &retry.Result{}}
		data, err := protocol.Encode(r)
		if err != nil {
			b.Fatal(err)
		}
		return r, data, protocol.ReportSubject(protocol.Shard(j.ID, cfg.Shards), "bench")
	}
	pr, pdata, psubj := mk(pinned, 0)
	gr, _, gsubj := mk(group, epoch)
	env := execution.Env{Now: now, Rand: rand.Int64N}
	b.Run("decode+apply", func(b *testing.B) {
		for b.Loop() {
			r, err := protocol.DecodeReport(pdata)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := execution.Apply(nil, execution.Report{Report: r}, env); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("checks-pinned", func(b *testing.B) {
		for b.Loop() {
			if _, ok := c.ingest.ShardOK(psubj, pr.JobID); !ok {
				b.Fatal("shard")
			}
			if reason, detail, _ := c.ingest.AuthorizeCreate(ctx, pr); reason != "" {
				b.Fatal(detail)
			}
		}
	})
	b.Run("checks-group", func(b *testing.B) {
		for b.Loop() {
			if _, ok := c.ingest.ShardOK(gsubj, gr.JobID); !ok {
				b.Fatal("shard")
			}
			if reason, detail := c.ingest.AuthorizeEpoch(ctx, gr); reason != "" {
				b.Fatal(detail)
			}
			if reason, detail, _ := c.ingest.AuthorizeCreate(ctx, gr); reason != "" {
				b.Fatal(detail)
			}
		}
	})
}
