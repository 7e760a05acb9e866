package streams

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/internal/natstest"
	"github.com/axsched/ax/internal/testutil"
	"github.com/axsched/ax/pkg/protocol"
)

// TestEventSubjectsBounded: AX_EVT holds the events of many one-shot jobs
// on at most EventPartitions subjects per state (and for retirements),
// not one subject per job, while a plain NATS subscriber still sees each
// event on ax.evt.<state>.<job>. A stream made before the transform (an
// earlier controller's) gets it from Ensure and keeps what it held.
func TestEventSubjectsBounded(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.JetStream(t, srv.URL())
	ctx := testutil.Context(t, 30*time.Second)

	// AX_EVT as an earlier controller made it: no transform.
	old := streamConfig(t, Config{}, protocol.StreamEvents)
	old.SubjectTransform = nil
	if _, err := js.CreateStream(ctx, old); err != nil {
		t.Fatal(err)
	}
	before := "ax-t1-20261129120000-before"
	if _, err := js.Publish(ctx, protocol.EventSubject(protocol.StateSuccess, before), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(ctx, js, Config{}); err != nil {
		t.Fatal(err)
	}

	core := make(chan string, 4096)
	sub, err := nc.Subscribe(protocol.SubjectEventsAll, func(m *nats.Msg) { core <- m.Subject })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	const jobs = 500
	var published []string
	for i := range jobs {
		job := fmt.Sprintf("ax-t1-20261129120000-j%05d", i)
		for _, subj := range []string{
			protocol.EventSubject(protocol.StatePending, job),
			protocol.EventSubject(protocol.StateSuccess, job),
			protocol.JobRetiredSubject(job),
		} {
			if _, err := js.Publish(ctx, subj, []byte("{}")); err != nil {
				t.Fatal(err)
			}
			published = append(published, subj)
		}
	}

	st, err := js.Stream(ctx, protocol.StreamEvents)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(protocol.SubjectEventsAll))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3*jobs+1 {
		t.Fatalf("AX_EVT holds %d messages, want %d", info.State.Msgs, 3*jobs+1)
	}
	// Three kinds of subject, EventPartitions each, and the one event
	// stored before the transform, on its job.
	if max := 3*protocol.EventPartitions + 1; info.State.NumSubjects > uint64(max) {
		t.Fatalf("AX_EVT holds %d subjects for %d jobs, want at most %d", info.State.NumSubjects, jobs, max)
	}
	if n := info.State.Subjects[protocol.EventSubject(protocol.StateSuccess, before)]; n != 1 {
		t.Fatalf("the event stored before the transform: %d on its subject, want 1 (%v)", n, info.State.Subjects)
	}
	for s := range info.State.Subjects {
		if s == protocol.EventSubject(protocol.StateSuccess, before) {
			continue
		}
		if !strings.HasPrefix(s, "ax.evt.PENDING.") && !strings.HasPrefix(s, "ax.evt.SUCCESS.") && !protocol.IsJobRetiredSubject(s) {
			t.Fatalf("stored on %s", s)
		}
	}

	for i, want := range published {
		select {
		case got := <-core:
			if got != want {
				t.Fatalf("core subscriber: message %d on %s, want %s", i, got, want)
			}
		case <-ctx.Done():
			t.Fatalf("core subscriber: %d of %d messages", i, len(published))
		}
	}
}

// TestEventStoredSubjectMatchesServer: protocol.EventStoredSubject names
// the subject the server stores each event on, and a retirement is stored
// on the subject it was published on (its job's partition already).
func TestEventStoredSubjectMatchesServer(t *testing.T) {
	js, ctx := startJetStream(t)
	if _, err := Ensure(ctx, js, Config{}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 300 {
		job := fmt.Sprintf("ax-t1-20261129120000-%06x", i*7919)
		for _, st := range []protocol.State{protocol.StateFailed, "job"} {
			subj := protocol.EventSubject(st, job)
			if st == "job" {
				subj = protocol.JobRetiredSubject(job)
			}
			if _, err := js.Publish(ctx, subj, []byte(subj)); err != nil {
				t.Fatal(err)
			}
			if st == "job" {
				want = append(want, subj)
				continue
			}
			want = append(want, protocol.EventStoredSubject(st, job))
		}
	}
	cons, err := js.OrderedConsumer(ctx, protocol.StreamEvents, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	parts := map[string]bool{}
	for i, w := range want {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if m.Subject() != w {
			t.Fatalf("published on %s, stored on %s, EventStoredSubject says %s", m.Data(), m.Subject(), w)
		}
		parts[w] = true
	}
	// 300 jobs fill every partition of both kinds.
	if len(parts) != 2*protocol.EventPartitions {
		t.Fatalf("%d stored subjects, want %d", len(parts), 2*protocol.EventPartitions)
	}
}
