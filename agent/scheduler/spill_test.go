package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/axsched/ax/agent/store"
	"github.com/axsched/ax/internal/protocoltest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/schedule"
)

// TestActiveCountsSpilledAttempts: a job's live count includes the
// attempts left in SQLite by a full ready queue, stays equal to the
// store's count when one of them is cancelled and when they are reloaded
// and run, and the job's record goes once none is left.
func TestActiveCountsSpilledAttempts(t *testing.T) {
	cfg := offlineConfig(t, "edge-c")
	cfg.Queue.Size = 16
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, cfg, start)
	s := o.s
	j := protocoltest.NewJob("edge-c", "noop", schedule.Spec{Asap: true}, nil)
	j.Concurrency = 32 // the queue's bound, not the job's, leaves some in SQLite
	const n = 20
	for i := range n {
		o.apply(protocoltest.RunCmd(j, 1, start.Add(-time.Duration(n-i)*time.Second)))
	}
	check := func(when string) {
		t.Helper()
		live, err := o.st.LiveByJob(context.Background())
		must(t, err)
		want := live[j.ID].Triggered + live[j.ID].Running
		got := 0
		if jr := s.jobs.byID[j.ID]; jr != nil {
			got = jr.active
		}
		if got != want {
			t.Fatalf("%s: job counts %d live attempts, the store has %d", when, got, want)
		}
	}
	if !s.runs.spilled || s.runs.mem != cfg.Queue.Size {
		t.Fatalf("spilled=%v mem=%d after %d runs with a queue of %d", s.runs.spilled, s.runs.mem, n, cfg.Queue.Size)
	}
	check("spilled")
	// Cancel the newest run: it waits in SQLite.
	o.apply(protocol.Command{Kind: protocol.CmdCancel, Cancel: &protocol.Cancel{ExecID: protocol.ExecID(j.ID, start.Add(-time.Second))}})
	check("a spilled attempt cancelled")
	// Run everything: dispatch, finish, reload, until none is left.
	for range 4 * n {
		s.runs.pump()
		o.sync()
		for _, r := range s.runs.running {
			<-s.runs.work
			must(t, o.st.Do(context.Background(), func(tx *store.Tx) error {
				_, err := tx.Finish(r.it.id, store.StateFinished, start, "success", nil)
				return err
			}))
			s.runs.busy--
			s.runs.done(r.it)
		}
		check("running")
	}
	if jr := s.jobs.byID[j.ID]; jr != nil {
		t.Fatalf("job record left with %d live attempts after every run finished", jr.active)
	}
}

// TestStopWhileInboxNeverEmpties: when fires come faster than the store
// takes their writes, the scheduler's mailbox never empties; a stop must
// still end the scheduler (it used to drain it to empty first, and
// so never returned while the overload lasted).
func TestStopWhileInboxNeverEmpties(t *testing.T) {
	o := newOffline(t, offlineConfig(t, "edge-x"), time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := o.s
	ctx, cancel := context.WithCancel(context.Background())
	// Messages that keep coming while they are handled: the mailbox never
	// empties.
	flooded := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(flooded)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			if n == 1000 {
				cancel()
			}
			s.env.mail.post(skewCheck{})
		}
	}()
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	testutil.Eventually(t, 20*time.Second, "the scheduler to stop", func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	})
	close(stop)
	<-flooded
}

// TestReloadLeavesParkedRowsOut: a job with a small concurrency and a deep
// backlog parks most of its attempts in SQLite; each reload reads about
// the rows it loads, not the whole backlog again (a reload used to read
// every spilled row of the parked job and refuse them one by one: about
// n²/4 rows for n attempts). Every attempt still runs once.
func TestReloadLeavesParkedRowsOut(t *testing.T) {
	cfg := offlineConfig(t, "edge-p")
	cfg.Queue.Size = 64
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := newOffline(t, cfg, start)
	s := o.s
	j := protocoltest.NewJob("edge-p", "noop", schedule.Spec{Asap: true}, nil)
	j.Concurrency = 4
	const n = 400
	for i := range n {
		o.apply(protocoltest.RunCmd(j, 1, start.Add(-time.Duration(n-i)*time.Second)))
	}
	read0 := o.st.Stats().ExecRowsRead
	ran := map[int64]bool{}
	for range 4 * n {
		s.runs.pump()
		o.sync()
		for _, r := range s.runs.running {
			<-s.runs.work
			if ran[r.it.id] {
				t.Fatalf("row %d dispatched twice", r.it.id)
			}
			ran[r.it.id] = true
			must(t, o.st.Do(context.Background(), func(tx *store.Tx) error {
				_, err := tx.Finish(r.it.id, store.StateFinished, start, "success", nil)
				return err
			}))
			s.runs.busy--
			s.runs.done(r.it)
		}
		if len(ran) == n {
			break
		}
	}
	if len(ran) != n {
		t.Fatalf("%d of %d attempts ran", len(ran), n)
	}
	read := o.st.Stats().ExecRowsRead - read0
	t.Logf("reloads read %d rows for %d attempts", read, n)
	if read > 20*n {
		t.Fatalf("reloads read %d rows for %d attempts (> %d)", read, n, 20*n)
	}
}
