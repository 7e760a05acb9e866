package auth_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/pkg/protocol"
)

// orderedBody is the create request nats.go's ordered consumer sends for
// agent id (as seen on the wire), with extra config fields.
func orderedBody(id, name string, extra string) string {
	return `{"stream_name":"AX_CMD","config":{"name":"` + name + `","deliver_policy":"by_start_sequence","opt_start_seq":2,` +
		`"ack_policy":"none","filter_subject":"ax.cmd.` + id + `","replay_policy":"instant","inactive_threshold":300000000000,` +
		`"num_replicas":1,"mem_storage":true` + extra + `},"action":""}`
}

// TestValidateConsumerCreate: the ordered consumer's request passes and is
// forwarded with the same meaning; every field beyond it is refused by name.
func TestValidateConsumerCreate(t *testing.T) {
	name := protocol.CommandConsumerPrefix("edge-a") + "Xyz_1"
	out, err := auth.ValidateConsumerCreate("edge-a", name, []byte(orderedBody("edge-a", name, "")))
	if err != nil {
		t.Fatalf("ordered consumer refused: %v", err)
	}
	var req server.CreateConsumerRequest
	if err := json.Unmarshal(out, &req); err != nil {
		t.Fatal(err)
	}
	if c := req.Config; req.Stream != "AX_CMD" || c.Name != name || c.FilterSubject != "ax.cmd.edge-a" || c.OptStartSeq != 2 ||
		c.DeliverPolicy != server.DeliverByStartSequence || c.InactiveThreshold != 5*time.Minute || !c.MemoryStorage {
		t.Fatalf("forwarded %s", out)
	}
	for _, tc := range []struct{ name, id, consumer, body, field string }{
		{"push", "edge-a", name, orderedBody("edge-a", name, `,"deliver_subject":"$KV.ax_jobs.j"`), "config.deliver_subject"},
		{"push group", "edge-a", name, orderedBody("edge-a", name, `,"deliver_group":"g"`), "config.deliver_group"},
		{"flow control", "edge-a", name, orderedBody("edge-a", name, `,"flow_control":true`), "config.flow_control"},
		{"heartbeat", "edge-a", name, orderedBody("edge-a", name, `,"idle_heartbeat":1000`), "config.idle_heartbeat"},
		{"sourcing", "edge-a", name, orderedBody("edge-a", name, `,"sourcing":true`), "config.sourcing"},
		{"backoff", "edge-a", name, orderedBody("edge-a", name, `,"backoff":[1]`), "config.backoff"},
		{"unknown field", "edge-a", name, orderedBody("edge-a", name, `,"deliver_to":"x"`), "body"},
		{"another agent's filter", "edge-b", protocol.CommandConsumerPrefix("edge-b") + "x", orderedBody("edge-a", "", ""), "config.filter_subject"},
		{"name mismatch", "edge-a", name, orderedBody("edge-a", name+"2", ""), "config.name"},
		{"foreign name", "edge-a", "edge-ab~x", orderedBody("edge-a", "", ""), "consumer name"},
		{"bare prefix", "edge-a", "edge-a~", orderedBody("edge-a", "", ""), "consumer name"},
		{"other stream", "edge-a", name, strings.Replace(orderedBody("edge-a", name, ""), "AX_CMD", "AX_RPT", 1), "stream_name"},
		{"two values, the second pushing", "edge-a", name, orderedBody("edge-a", name, "") + `{"config":{"deliver_subject":"x"}}`, "body"},
		{"replicas", "edge-a", name, strings.Replace(orderedBody("edge-a", name, ""), `"num_replicas":1`, `"num_replicas":3`, 1), "config.num_replicas"},
		{"idle forever", "edge-a", name, strings.Replace(orderedBody("edge-a", name, ""), "300000000000", "0", 1), "config.inactive_threshold"},
		{"not json", "edge-a", name, "x", "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := auth.ValidateConsumerCreate(tc.id, tc.consumer, []byte(tc.body))
			if !errors.Is(err, auth.ErrInvalid) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %v, want ErrInvalid naming %s", err, tc.field)
			}
		})
	}
}

// FuzzValidateConsumerCreate: whatever the body, an accepted request is an
// ephemeral pull consumer of AX_CMD filtered to the agent's subject,
// without acknowledgements and without any delivery subject.
func FuzzValidateConsumerCreate(f *testing.F) {
	name := protocol.CommandConsumerPrefix("edge-a") + "n_1"
	f.Add([]byte(orderedBody("edge-a", name, "")))
	f.Add([]byte(orderedBody("edge-a", name, `,"deliver_subject":"x"`)))
	f.Add([]byte(orderedBody("edge-a", name, `,"metadata":{"k":"v"},"headers_only":true`)))
	f.Add([]byte(orderedBody("edge-a", name, "") + `{}`))
	f.Add([]byte(`{"stream_name":"AX_CMD","config":{"Deliver_Subject":"x","filter_subject":"ax.cmd.edge-a"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := auth.ValidateConsumerCreate("edge-a", name, body)
		if err != nil {
			if !errors.Is(err, auth.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		var req server.CreateConsumerRequest
		if err := json.Unmarshal(out, &req); err != nil {
			t.Fatalf("forwarded body does not decode: %v", err)
		}
		c := req.Config
		if req.Stream != "AX_CMD" || c.Name != name || c.FilterSubject != "ax.cmd.edge-a" || len(c.FilterSubjects) != 0 ||
			c.DeliverSubject != "" || c.DeliverGroup != "" || c.Heartbeat != 0 || c.FlowControl || c.Durable != "" ||
			c.Direct || c.Sourcing || c.AckPolicy != server.AckNone || c.InactiveThreshold <= 0 {
			t.Fatalf("accepted %s", out)
		}
	})
}

// TestReplyAllowed: only the agent's own inbox and service-import replies.
func TestReplyAllowed(t *testing.T) {
	for reply, want := range map[string]bool{
		protocol.InboxPrefix("edge-a") + ".abc":  true,
		"_R_.Ab12Cd.xyz":                         true,
		"":                                       false,
		protocol.InboxPrefix("edge-a"):           false,
		protocol.InboxPrefix("edge-ab") + ".abc": false,
		protocol.InboxPrefix("edge-b") + ".abc":  false,
		"_INBOX.abc":                             false,
		"_R_.":                                   false,
		"$KV.ax_jobs.j1":                         false,
		"$JS.API.STREAM.PURGE.KV_ax_jobs":        false,
		"$JS.ACK.AX_RPT.ax-shard-0.1.2.3.4.0":    false,
		"ax.evt.FAILED.j1":                       false,
		"ax.cmd.edge-b":                          false,
	} {
		if got := auth.ReplyAllowed("edge-a", reply); got != want {
			t.Errorf("ReplyAllowed(edge-a, %q) = %v, want %v", reply, got, want)
		}
	}
}
