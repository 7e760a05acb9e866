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

// serveReg answers registrations (ax.reg.*) on the admin connection; before
// each answer it runs before (which may publish in the ax account).
func (e *env) serveReg(before func()) {
	e.t.Helper()
	sub, err := e.admin.Subscribe(protocol.SubjectRegisterAll, func(m *nats.Msg) {
		if before != nil {
			before()
		}
		_ = m.Respond([]byte("ok:" + m.Subject))
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := e.admin.Flush(); err != nil {
		e.t.Fatal(err)
	}
}

// barrier makes a registration round trip for agent id: everything agent
// id published before it has been routed, and everything the admin
// published before answering has been delivered.
func (ac *agentConn) barrier(t *testing.T, id string) {
	t.Helper()
	if _, err := ac.nc.Request(protocol.RegisterSubject(id), []byte("{}"), 10*time.Second); err != nil {
		t.Fatalf("registration round trip: %v", err)
	}
}

// TestAgentSeesNothingOfAX: agent A subscribed to everything in its own
// account receives nothing published in the ax account (B's commands, B's
// inbox, _INBOX, reports, events, KV, advisories) — only its own request
// and the answer to it.
func TestAgentSeesNothingOfAX(t *testing.T) {
	e := newEnv(t, "a", "b")
	secrets := []string{protocol.CommandSubject("b"), protocol.CommandSubject("a"), protocol.InboxPrefix("b") + ".x",
		protocol.InboxPrefix("a") + ".x", "_INBOX.x", protocol.ReportSubject(0, "b"), protocol.RegisterSubject("b"),
		protocol.EventSubject(protocol.StateSuccess, "j1"), "$KV." + protocol.BucketJobs + ".j1", "$JS.EVENT.ADVISORY.x"}
	e.serveReg(func() {
		for _, s := range secrets {
			_ = e.admin.Publish(s, []byte("secret"))
		}
	})
	a := e.mustConnect("a")
	all, err := a.nc.SubscribeSync(">")
	if err != nil {
		t.Fatal(err)
	}
	a.barrier(t, "a")
	for {
		m, err := all.NextMsg(0)
		if err != nil {
			break
		}
		if m.Subject != protocol.RegisterSubject("a") && !strings.HasPrefix(m.Subject, protocol.InboxPrefix("a")+".") {
			t.Errorf("agent A received %s: %q", m.Subject, m.Data)
		}
	}
}

// TestAgentReachesOnlyItsImports: what agent A publishes outside its
// imports (as B, commands, events, KV, the stream and consumer API) never
// reaches the ax account, and no stream stores anything.
func TestAgentReachesOnlyItsImports(t *testing.T) {
	e := newEnv(t, "a", "b")
	e.serveReg(nil)
	targets := []string{
		protocol.ReportSubject(0, "b"), protocol.RegisterSubject("b"), protocol.HeartbeatSubject("b"),
		protocol.CommandSubject("a"), protocol.EventSubject(protocol.StateSuccess, "job1"),
		"$KV." + protocol.BucketJobs + ".job1",
		"$JS.API.DIRECT.GET.KV_" + protocol.BucketJobs + ".$KV." + protocol.BucketJobs + ".job1",
		"$JS.API.STREAM.INFO.KV_" + protocol.BucketAgents,
		"$JS.API.CONSUMER.NAMES." + protocol.StreamCommands,
		"$JS.API.CONSUMER.DELETE." + protocol.StreamReports + ".x",
		"$JS.API.STREAM.DELETE." + protocol.StreamCommands,
		"$JS.API.STREAM.PURGE.KV_" + protocol.BucketJobs,
		"$JS.API.STREAM.MSG.GET." + protocol.StreamCommands,
		"$JS.API.CONSUMER.CREATE." + protocol.StreamCommands + ".x",
		"$JS.API.CONSUMER.DURABLE.CREATE." + protocol.StreamCommands + ".x",
		"$JS.API.CONSUMER.CREATE." + protocol.StreamCommands + ".x." + protocol.CommandSubject("b"),
		"$JS.API.CONSUMER.CREATE." + protocol.StreamReports + ".x." + protocol.ReportSubject(0, "a"),
		"$JS.API.CONSUMER.MSG.NEXT." + protocol.StreamReports + ".x",
		"$JS.API.ACCOUNT.PURGE.AX",
		"$SYS.REQ.SERVER.PING",
	}
	spies := make([]*nats.Subscription, len(targets))
	for i, s := range targets {
		sub, err := e.admin.SubscribeSync(s)
		if err != nil {
			t.Fatal(err)
		}
		spies[i] = sub
	}
	if err := e.admin.Flush(); err != nil {
		t.Fatal(err)
	}
	a := e.mustConnect("a")
	for _, s := range targets {
		if err := a.nc.Publish(s, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	a.barrier(t, "a")
	for i, s := range targets {
		if n, _, _ := spies[i].Pending(); n != 0 {
			t.Errorf("A's publish on %s reached the ax account", s)
		}
	}
	for _, s := range []string{protocol.StreamReports, protocol.StreamEvents, protocol.StreamCommands} {
		st, err := e.ajs.Stream(ctx(t), s)
		if err != nil {
			t.Fatal(err)
		}
		if n := st.CachedInfo().State.Msgs; n != 0 {
			t.Errorf("stream %s holds %d messages", s, n)
		}
	}
}

// TestAgentDeniedJetStream: the JetStream calls an attacker would make
// fail: a consumer on B's commands, an unfiltered consumer, any KV bucket;
// and the gateway refuses a create that asks for more than the agent's own
// pull consumer (push delivery, B's filter, no filter, several filters, a
// durable, acknowledgements, another name), naming the field.
func TestAgentDeniedJetStream(t *testing.T) {
	e := newEnv(t, "a", "b")
	a := e.mustConnect("a")
	c := ctx(t)
	short := func(t *testing.T) context.Context {
		sc, cancel := context.WithTimeout(c, 5*time.Second)
		t.Cleanup(cancel)
		return sc
	}
	if _, err := a.js.OrderedConsumer(short(t), protocol.StreamCommands, jetstream.OrderedConsumerConfig{
		NamePrefix: protocol.CommandConsumerPrefix("a") + "x", FilterSubjects: []string{protocol.CommandSubject("b")}}); err == nil {
		t.Error("created a consumer on B's commands")
	}
	if _, err := a.js.OrderedConsumer(short(t), protocol.StreamCommands, jetstream.OrderedConsumerConfig{
		NamePrefix: protocol.CommandConsumerPrefix("a") + "x"}); err == nil {
		t.Error("created an unfiltered consumer on AX_CMD")
	}
	for _, bucket := range []string{protocol.BucketJobs, protocol.BucketExecs, protocol.BucketIdem, protocol.BucketAgents, protocol.BucketLeases} {
		if _, err := a.js.KeyValue(short(t), bucket); err == nil {
			t.Errorf("opened KV bucket %s", bucket)
		}
	}
	if _, err := a.js.AccountInfo(short(t)); !errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		t.Errorf("account info: %v, want JetStream not enabled", err)
	}
	own := protocol.CommandConsumerPrefix("a") + "evil"
	for _, tc := range []struct {
		name, consumer, field string
		cfg                   map[string]any
	}{
		{"push to the KV", own, "deliver_subject", map[string]any{"deliver_subject": "$KV.ax_jobs.j1"}},
		{"push with heartbeats", own, "idle_heartbeat", map[string]any{"idle_heartbeat": int64(time.Second)}},
		{"body filter is B's", own, "filter_subject", map[string]any{"filter_subject": protocol.CommandSubject("b")}},
		{"body without filter", own, "filter_subject", map[string]any{"filter_subject": ""}},
		{"several filters", own, "filter_subjects", map[string]any{"filter_subjects": []string{protocol.CommandSubject("a")}}},
		{"durable", own, "durable_name", map[string]any{"durable_name": own}},
		{"acknowledged", own, "ack_policy", map[string]any{"ack_policy": "explicit"}},
		{"no inactive threshold", own, "inactive_threshold", map[string]any{"inactive_threshold": 0}},
		{"direct (sourcing) consumer", own, "direct", map[string]any{"direct": true}},
		{"another name", "evil", "must start with", nil},
		{"B's name", protocol.CommandConsumerPrefix("b") + "x", "must start with", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := map[string]any{"name": tc.consumer, "filter_subject": protocol.CommandSubject("a"), "ack_policy": "none",
				"deliver_policy": "all", "inactive_threshold": int64(time.Minute), "num_replicas": 1}
			for k, v := range tc.cfg {
				cfg[k] = v
			}
			body, _ := json.Marshal(map[string]any{"stream_name": protocol.StreamCommands, "config": cfg})
			subj := "$JS.API.CONSUMER.CREATE." + protocol.StreamCommands + "." + tc.consumer + "." + protocol.CommandSubject("a")
			msg, err := a.nc.Request(subj, body, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(msg.Data), `"error"`) || !strings.Contains(string(msg.Data), tc.field) {
				t.Fatalf("answer %s, want an error naming %s", msg.Data, tc.field)
			}
		})
	}
	// Deleting another agent's consumer is refused too.
	msg, err := a.nc.Request("$JS.API.CONSUMER.DELETE."+protocol.StreamCommands+"."+protocol.CommandConsumerPrefix("b")+"x", nil, 10*time.Second)
	if err != nil || !strings.Contains(string(msg.Data), `"error"`) {
		t.Errorf("delete of B's consumer: %v %s", err, msg.Data)
	}
	st, err := e.ajs.Stream(c, protocol.StreamCommands)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.CachedInfo().State.Consumers; n != 0 {
		t.Fatalf("AX_CMD has %d consumers after refused creates", n)
	}
}

// TestAgentOwnWork: with only its own credentials agent A registers,
// heartbeats, reads its commands from a cursor (and only its own) through
// an ordered consumer named for it, and publishes reports with PubAcks.
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
	got := consumeOwn(t, a, "a", 2)
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
	for _, shard := range []int{0, 7, 15} {
		ack, err := a.js.Publish(c, protocol.ReportSubject(shard, "a"), []byte("report"), jetstream.WithMsgID("x/1/"+string(rune('a'+shard))))
		if err != nil {
			t.Fatalf("report on shard %d: %v", shard, err)
		}
		if ack.Stream != protocol.StreamReports {
			t.Fatalf("PubAck from %s", ack.Stream)
		}
	}
}

// consumeOwn starts agent id's ordered consumer from stream sequence start
// (as the agent does) and returns the stream sequences it receives.
func consumeOwn(t *testing.T, ac *agentConn, id string, start uint64) <-chan uint64 {
	t.Helper()
	cons, err := ac.js.OrderedConsumer(ctx(t), protocol.StreamCommands, jetstream.OrderedConsumerConfig{
		NamePrefix:     protocol.CommandConsumerPrefix(id) + "t",
		FilterSubjects: []string{protocol.CommandSubject(id)},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
	})
	if err != nil {
		t.Fatalf("own ordered consumer: %v", err)
	}
	got := make(chan uint64, 16)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, _ := m.Metadata()
		if string(m.Data()) != "cmd for "+id {
			t.Errorf("%s got %q", id, m.Data())
		}
		got <- md.Sequence.Stream
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)
	return got
}

// TestReflectionStaysInAgentAccount: a pull status, a PubAck and the
// controller's answer sent to a reply subject of the agent's choice arrive
// in the agent's own account; the KV bucket and stream named there are
// untouched.
func TestReflectionStaysInAgentAccount(t *testing.T) {
	e := newEnv(t, "a")
	e.serveReg(nil)
	c := ctx(t)
	kv, err := e.ajs.KeyValue(c, protocol.BucketJobs)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := kv.Put(c, "j1", []byte(`{"id":"j1"}`))
	if err != nil {
		t.Fatal(err)
	}
	a := e.mustConnect("a")
	name := protocol.CommandConsumerPrefix("a") + "probe"
	body, _ := json.Marshal(map[string]any{"stream_name": protocol.StreamCommands, "config": map[string]any{
		"name": name, "filter_subject": protocol.CommandSubject("a"), "ack_policy": "none", "deliver_policy": "all",
		"inactive_threshold": int64(time.Minute), "num_replicas": 1}})
	if m, err := a.nc.Request("$JS.API.CONSUMER.CREATE."+protocol.StreamCommands+"."+name+"."+protocol.CommandSubject("a"), body, 10*time.Second); err != nil || strings.Contains(string(m.Data), `"error"`) {
		t.Fatalf("own consumer: %v", err)
	}
	for _, reply := range []string{"$KV." + protocol.BucketJobs + ".j1", "$JS.API.STREAM.PURGE.KV_" + protocol.BucketJobs} {
		sub, err := a.nc.SubscribeSync(reply)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT."+protocol.StreamCommands+"."+name, reply, []byte(`{"batch":1,"no_wait":true}`)); err != nil {
			t.Fatal(err)
		}
		if err := a.nc.PublishRequest(protocol.ReportSubject(1, "a"), reply, []byte("r")); err != nil {
			t.Fatal(err)
		}
		if err := a.nc.PublishRequest(protocol.RegisterSubject("a"), reply, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		for _, what := range []string{"pull status", "PubAck", "controller answer"} {
			if _, err := sub.NextMsg(10 * time.Second); err != nil {
				t.Fatalf("%s to %s did not arrive in A's account: %v", what, reply, err)
			}
		}
		_ = sub.Unsubscribe()
	}
	en, err := kv.Get(c, "j1")
	if err != nil || en.Revision() != rev {
		t.Fatalf("ax_jobs/j1: %v, revision %d, was %d", err, en.Revision(), rev)
	}
}

// TestEnrollAtRuntime: an agent enrolled while the server runs (and while
// another agent works) gets its account at once; the other agent's
// connection and consumer are untouched.
func TestEnrollAtRuntime(t *testing.T) {
	e := newEnv(t, "a")
	e.serveReg(nil)
	a := e.mustConnect("a")
	got := consumeOwn(t, a, "a", 1)
	e.enroll("b")
	b := e.mustConnect("b")
	b.barrier(t, "b")
	a.barrier(t, "a")
	if _, err := e.ajs.Publish(ctx(t), protocol.CommandSubject("a"), []byte("cmd for a")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
	case <-ctx(t).Done():
		t.Fatal("A's consumer stopped after B was enrolled")
	}
	if _, err := b.js.Publish(ctx(t), protocol.ReportSubject(2, "b"), []byte("r")); err != nil {
		t.Fatalf("B's report: %v", err)
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
