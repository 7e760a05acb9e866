package auth_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/pkg/protocol"
)

// TestAgentDeniedSubscriptions: agent A subscribing outside its own inbox
// is refused by the server (the subscription reports the violation).
func TestAgentDeniedSubscriptions(t *testing.T) {
	e := newEnv(t, "a", "b")
	a := e.mustConnect("a")
	for _, tc := range []struct{ name, subject string }{
		{"B's commands", protocol.CommandSubject("b")},
		{"every command", protocol.SubjectCommandsAll},
		{"own command subject (only via the consumer)", protocol.CommandSubject("a")},
		{"B's inbox", protocol.InboxPrefix("b") + ".>"},
		{"the global inbox", "_INBOX.>"},
		{"every subject", ">"},
		{"B's reports", "ax.rpt.*.b"},
		{"B's registrations", protocol.RegisterSubject("b")},
		{"events", protocol.SubjectEventsAll},
		{"KV updates", "$KV.>"},
		{"JetStream advisories", "$JS.EVENT.>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := a.nc.SubscribeSync(tc.subject)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			a.expectViolation(t, tc.subject)
			// Something is published there; A must not get it. The admin
			// flush puts it on A's connection before A's own PONG.
			if err := e.admin.Publish(strings.ReplaceAll(strings.ReplaceAll(tc.subject, ">", "x"), "*", "0"), []byte("secret")); err != nil {
				t.Fatal(err)
			}
			if err := e.admin.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := a.nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if n, _, _ := sub.Pending(); n != 0 {
				t.Fatalf("subscribe %s: %d messages received", tc.subject, n)
			}
		})
	}
	if !a.nc.IsConnected() {
		t.Fatal("a violation must not cost the agent its connection")
	}
}

// TestAgentDeniedPublishes: agent A publishing as B, events, or to the
// JetStream/KV API beyond its own consumer is refused and stores nothing.
func TestAgentDeniedPublishes(t *testing.T) {
	e := newEnv(t, "a", "b")
	a := e.mustConnect("a")
	for _, tc := range []struct{ name, subject string }{
		{"a report as B", protocol.ReportSubject(0, "b")},
		{"a registration as B", protocol.RegisterSubject("b")},
		{"a heartbeat as B", protocol.HeartbeatSubject("b")},
		{"a command", protocol.CommandSubject("a")},
		{"an event", protocol.EventSubject(protocol.State("SUCCESS"), "job1")},
		{"a KV put", "$KV." + protocol.BucketJobs + ".job1"},
		{"a KV direct get", "$JS.API.DIRECT.GET.KV_" + protocol.BucketJobs + ".$KV." + protocol.BucketJobs + ".job1"},
		{"stream info of a KV bucket", "$JS.API.STREAM.INFO.KV_" + protocol.BucketAgents},
		{"stream info of AX_CMD", "$JS.API.STREAM.INFO." + protocol.StreamCommands},
		{"the consumer list of AX_CMD", "$JS.API.CONSUMER.NAMES." + protocol.StreamCommands},
		{"a consumer delete on AX_RPT", "$JS.API.CONSUMER.DELETE." + protocol.StreamReports + ".x"},
		{"a stream delete", "$JS.API.STREAM.DELETE." + protocol.StreamCommands},
		{"a stream purge", "$JS.API.STREAM.PURGE." + protocol.StreamCommands},
		{"a message delete", "$JS.API.STREAM.MSG.DELETE." + protocol.StreamCommands},
		{"a stream message get", "$JS.API.STREAM.MSG.GET." + protocol.StreamCommands},
		{"a direct get on AX_CMD", "$JS.API.DIRECT.GET." + protocol.StreamCommands},
		{"a consumer info", "$JS.API.CONSUMER.INFO." + protocol.StreamCommands + ".x"},
		{"account info", "$JS.API.INFO"},
		{"an unfiltered consumer create", "$JS.API.CONSUMER.CREATE." + protocol.StreamCommands + ".x"},
		{"a legacy durable create", "$JS.API.CONSUMER.DURABLE.CREATE." + protocol.StreamCommands + ".x"},
		{"a consumer on B's commands", "$JS.API.CONSUMER.CREATE." + protocol.StreamCommands + ".x." + protocol.CommandSubject("b")},
		{"a consumer on every command", "$JS.API.CONSUMER.CREATE." + protocol.StreamCommands + ".x.ax.cmd.>"},
		{"a consumer on AX_RPT", "$JS.API.CONSUMER.CREATE." + protocol.StreamReports + ".x." + protocol.ReportSubject(0, "a")},
		{"a pull on AX_RPT", "$JS.API.CONSUMER.MSG.NEXT." + protocol.StreamReports + ".x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := a.nc.Publish(tc.subject, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
			a.expectViolation(t, tc.subject)
		})
	}
	// Nothing A tried reached a stream.
	for _, s := range []string{protocol.StreamReports, protocol.StreamEvents, protocol.StreamCommands} {
		st, err := e.ajs.Stream(ctx(t), s)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.CachedInfo().State.Msgs; n != 0 {
			t.Errorf("stream %s holds %d messages after denied publishes", s, n)
		}
	}
}

// TestAgentDeniedJetStream: the JetStream client calls an attacker would
// make fail: a consumer on B's commands, an unfiltered consumer, any KV
// bucket, a filtered-create subject whose body asks for B's subject.
func TestAgentDeniedJetStream(t *testing.T) {
	e := newEnv(t, "a", "b")
	a := e.mustConnect("a")
	c := ctx(t)
	// A denied request gets no answer: each call is bounded by a short
	// context and the test asserts the server's violation, not the timeout.
	short := func(t *testing.T) context.Context {
		sc, cancel := context.WithTimeout(c, 1500*time.Millisecond)
		t.Cleanup(cancel)
		return sc
	}
	createPrefix := "$JS.API.CONSUMER.CREATE." + protocol.StreamCommands + "."
	t.Run("denied calls", func(t *testing.T) {
		t.Run("ordered consumer on B's commands", func(t *testing.T) {
			t.Parallel()
			_, err := a.js.OrderedConsumer(short(t), protocol.StreamCommands, jetstream.OrderedConsumerConfig{
				NamePrefix: "onb", FilterSubjects: []string{protocol.CommandSubject("b")}})
			if err == nil {
				t.Fatal("created a consumer on B's commands")
			}
			a.expectViolationWhere(t, "consumer create on ax.cmd.b", func(s string) bool {
				return strings.HasPrefix(s, createPrefix+"onb") && strings.HasSuffix(s, "."+protocol.CommandSubject("b"))
			})
		})
		t.Run("unfiltered ordered consumer on AX_CMD", func(t *testing.T) {
			t.Parallel()
			if _, err := a.js.OrderedConsumer(short(t), protocol.StreamCommands, jetstream.OrderedConsumerConfig{NamePrefix: "unf"}); err == nil {
				t.Fatal("created an unfiltered consumer on AX_CMD")
			}
			a.expectViolationWhere(t, "unfiltered consumer create", func(s string) bool { return strings.HasPrefix(s, createPrefix+"unf") })
		})
		t.Run("two filters including B's", func(t *testing.T) {
			t.Parallel()
			if _, err := a.js.OrderedConsumer(short(t), protocol.StreamCommands, jetstream.OrderedConsumerConfig{
				NamePrefix: "two", FilterSubjects: []string{protocol.CommandSubject("a"), protocol.CommandSubject("b")}}); err == nil {
				t.Fatal("created a consumer with B's subject among its filters")
			}
			a.expectViolationWhere(t, "multi-filter consumer create", func(s string) bool { return strings.HasPrefix(s, createPrefix+"two") })
		})
		for _, bucket := range []string{protocol.BucketJobs, protocol.BucketExecs, protocol.BucketIdem, protocol.BucketAgents, protocol.BucketLeases} {
			t.Run("KV "+bucket, func(t *testing.T) {
				t.Parallel()
				if _, err := a.js.KeyValue(short(t), bucket); err == nil {
					t.Fatalf("opened KV bucket %s", bucket)
				}
				a.expectViolation(t, "$JS.API.STREAM.INFO.KV_"+bucket)
			})
		}
	})
	// The permitted subject with a body asking for more: the server checks
	// the body against the subject.
	for _, tc := range []struct {
		name string
		cfg  map[string]any
	}{
		{"body filter is B's", map[string]any{"name": "evil", "filter_subject": protocol.CommandSubject("b"), "ack_policy": "none"}},
		{"body without filter", map[string]any{"name": "evil", "ack_policy": "none"}},
		{"body with several filters", map[string]any{"name": "evil", "filter_subjects": []string{protocol.CommandSubject("a"), protocol.CommandSubject("b")}, "ack_policy": "none"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"stream_name": protocol.StreamCommands, "config": tc.cfg})
			subj := "$JS.API.CONSUMER.CREATE." + protocol.StreamCommands + ".evil." + protocol.CommandSubject("a")
			msg, err := a.nc.Request(subj, body, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var resp struct {
				Error *struct {
					Code int `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(msg.Data, &resp); err != nil {
				t.Fatal(err)
			}
			if resp.Error == nil {
				t.Fatalf("server created the consumer: %s", msg.Data)
			}
		})
	}
	// No consumer exists on AX_CMD after all that.
	st, err := e.ajs.Stream(c, protocol.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Consumers; n != 0 {
		t.Fatalf("AX_CMD has %d consumers after denied creates", n)
	}
}

// TestAgentOwnWork: with only its own credentials agent A registers,
// heartbeats, reads its commands from a cursor (and only its own) and
// publishes reports with PubAcks, without a single violation.
func TestAgentOwnWork(t *testing.T) {
	e := newEnv(t, "a", "b")
	c := ctx(t)
	for _, subj := range []string{protocol.SubjectRegisterAll, protocol.SubjectHeartbeatAll} {
		sub, err := e.admin.Subscribe(subj, func(m *nats.Msg) { _ = m.Respond([]byte("ok:" + m.Subject)) })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	// Commands: 1 and 3 for A, 2 for B, 4 for A.
	for _, to := range []string{"a", "b", "a", "a"} {
		if _, err := e.ajs.Publish(c, protocol.CommandSubject(to), []byte("cmd for "+to)); err != nil {
			t.Fatal(err)
		}
	}
	a := e.mustConnect("a")

	for _, subj := range []string{protocol.RegisterSubject("a"), protocol.HeartbeatSubject("a")} {
		m, err := a.nc.Request(subj, []byte("{}"), 10*time.Second)
		if err != nil {
			t.Fatalf("request %s: %v", subj, err)
		}
		if string(m.Data) != "ok:"+subj {
			t.Fatalf("reply %q", m.Data)
		}
	}

	cons, err := a.js.OrderedConsumer(c, protocol.StreamCommands, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{protocol.CommandSubject("a")},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    2, // cursor 1
	})
	if err != nil {
		t.Fatalf("own ordered consumer: %v", err)
	}
	got := make(chan uint64, 8)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, _ := m.Metadata()
		if string(m.Data()) != "cmd for a" {
			t.Errorf("A got %q", m.Data())
		}
		got <- md.Sequence.Stream
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Stop()
	for _, want := range []uint64{3, 4} {
		select {
		case seq := <-got:
			if seq != want {
				t.Fatalf("command seq %d, want %d", seq, want)
			}
		case <-c.Done():
			t.Fatalf("command %d not received", want)
		}
	}
	// A command published after the consumer started arrives too.
	if _, err := e.ajs.Publish(c, protocol.CommandSubject("a"), []byte("cmd for a")); err != nil {
		t.Fatal(err)
	}
	select {
	case seq := <-got:
		if seq != 5 {
			t.Fatalf("live command seq %d, want 5", seq)
		}
	case <-c.Done():
		t.Fatal("live command not received")
	}

	for shard := range []int{0, 7, 15} {
		ack, err := a.js.Publish(c, protocol.ReportSubject(shard, "a"), []byte("report"), jetstream.WithMsgID("x/1/"+string(rune('a'+shard))))
		if err != nil {
			t.Fatalf("report on shard %d: %v", shard, err)
		}
		if ack.Stream != protocol.StreamReports {
			t.Fatalf("PubAck from %s", ack.Stream)
		}
	}
	if v := a.violations(); len(v) != 0 {
		t.Fatalf("violations during own work: %v", v)
	}
}

// TestUnknownIdentityRefused: a key the controller never enrolled, or no
// credentials at all, cannot connect.
func TestUnknownIdentityRefused(t *testing.T) {
	e := newEnv(t, "a")
	pub, seed, err := auth.NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(e.dir, "stranger.nk")
	if err := auth.WriteSecretFile(path, auth.SeedFile("stranger", seed)); err != nil {
		t.Fatal(err)
	}
	opt, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.connectWith("stranger", opt, nats.MaxReconnects(0)); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("unenrolled key %s: err %v, want authorization violation", pub, err)
	}
	if _, err := e.connectWith("anon", nats.MaxReconnects(0)); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("no credentials: err %v, want authorization violation", err)
	}
}

// TestRevokeClosesAndRefuses: revoking A closes its live connection and
// refuses its reconnects; B is untouched. Rotating a key retires the old one.
func TestRevokeClosesAndRefuses(t *testing.T) {
	e := newEnv(t, "a", "b")
	disc := make(chan error, 4)
	a, err := e.connect("a", nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { disc <- err }),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	b := e.mustConnect("b")
	if _, err := e.reg.Revoke("a"); err != nil {
		t.Fatal(err)
	}
	e.apply()
	select {
	case <-disc:
	case <-time.After(10 * time.Second):
		t.Fatal("revoked agent's live connection was not closed")
	}
	// It keeps trying and is refused each time.
	deadline := time.After(10 * time.Second)
	for refused := false; !refused; {
		select {
		case err := <-a.errs:
			refused = errors.Is(err, nats.ErrAuthorization)
		case <-deadline:
			t.Fatal("reconnect of the revoked agent was not refused")
		}
	}
	if a.nc.IsConnected() {
		t.Fatal("revoked agent is connected")
	}
	if _, err := e.connect("a", nats.MaxReconnects(0)); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("new connection of revoked agent: err %v, want authorization violation", err)
	}
	if err := b.nc.Flush(); err != nil || !b.nc.IsConnected() {
		t.Fatalf("other agent lost its connection: %v", err)
	}

	// Rotation: the old key of B is refused, the new one works.
	oldSeed := filepath.Join(e.dir, "b.nk")
	oldOpt, err := nats.NkeyOptionFromSeed(oldSeed)
	if err != nil {
		t.Fatal(err)
	}
	en, err := e.reg.Enroll("b", auth.EnrollRequest{Rotate: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.apply()
	if _, err := e.connectWith("b", oldOpt, nats.MaxReconnects(0)); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("old key after rotation: err %v", err)
	}
	if err := auth.WriteSecretFile(oldSeed, auth.SeedFile("b", []byte(en.Seed))); err != nil {
		t.Fatal(err)
	}
	if _, err := e.connect("b", nats.MaxReconnects(0)); err != nil {
		t.Fatalf("new key after rotation: %v", err)
	}
}
