package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/internal/admission"
	"github.com/axsched/ax/pkg/protocol"
)

// Gateway operations: the token after the agent id in a gateway subject.
const (
	// OpCreate creates (or updates) a consumer of the agent's commands.
	OpCreate = "create"
	// OpDelete deletes one of the agent's consumers.
	OpDelete = "delete"
	// OpInfo stands for $JS.API.INFO; it is answered "JetStream not enabled".
	OpInfo = "info"
)

// GatewaySubjectAll matches every gateway request: ax.jsapi.<agent>.<op>[.<consumer>].
const GatewaySubjectAll = "ax.jsapi.>"

const gatewayPrefix = "ax.jsapi."

// GatewaySubject is the subject of gateway operation op of agent id.
func GatewaySubject(id, op string) string { return gatewayPrefix + id + "." + op }

// MaxConsumerIdle bounds the inactive threshold of an agent's consumer:
// the server deletes an abandoned one after at most this long. ax-agent
// asks for nats.go's ordered-consumer default, 5 minutes.
const MaxConsumerIdle = 10 * time.Minute

// The per-agent bounds of the requests the gateway forwards to JetStream
// (internal/admission): gatewayBurst at once, then one every
// gatewayEvery. An agent makes its consumer once per registration, and
// deletes the one before when nats.go remakes it, so the bounds never
// touch it; with MaxConsumerIdle they cap what one agent's key can hold
// of AX_CMD's consumers (max_consumers, shared by the fleet) at about
// 10 + 10 min / 2 s = 310, and keep its requests from holding up the
// others' (the gateway answers one request at a time). A request refused
// before it is forwarded (a body ValidateConsumerCreate rejects) costs
// no JetStream call and is not counted.
const (
	gatewayBurst = 10
	gatewayEvery = 2 * time.Second
)

// Reasons a request to a controller responder or the gateway is dropped
// (not answered).
const (
	// DropReply: the reply subject is neither the agent's inbox nor a
	// service-import reply.
	DropReply = "reply"
	// DropSubject: not a subject the responder serves.
	DropSubject = "subject"
	// RefuseRepeat: more requests of one agent than its bounds admit
	// (answered with an error).
	RefuseRepeat = "repeat"
)

// GatewayHooks report what the gateway did not serve, and give it its
// clock. Any may be nil.
type GatewayHooks struct {
	// Dropped is called for a request left unanswered.
	Dropped func(subject, reason string)
	// Refused is called for a request answered with an error because it
	// asked for more than the agent's own pull consumer; err names the field.
	Refused func(agent string, err error)
	// Limited is called for a request answered with an error because its
	// agent sent more than the gateway's bounds admit.
	Limited func(agent string)
	// Now is the clock of the bounds (a monotonic one); nil: time.Now.
	Now func() time.Time
}

// ServeGateway subscribes (queue group queue) the consumer gateway of the
// agents on nc, a connection of the ax account: the JetStream consumer
// API an agent's account imports (AgentImports) arrives here instead of at
// JetStream.
//
// Why: a consumer lives in the ax account, so its deliver_subject does
// too. JetStream does not check that its creator may publish there
// (nats-io/nats-server#8274); a push consumer an agent created could send
// the agent's commands, and idle heartbeats with an empty body, to
// $JS.API.STREAM.PURGE.… or $KV.…. The gateway forwards a create only
// for an ephemeral pull consumer of AX_CMD filtered to ax.cmd.<agent>, named
// protocol.CommandConsumerPrefix(agent)+…, with no acknowledgements
// (ValidateConsumerCreate), and a delete only for such a name. Pulls
// (CONSUMER.MSG.NEXT) go to JetStream directly: their reply subject is the
// agent's, in the agent's account, and nothing in them redirects delivery.
// A pull names a consumer, not an agent: an agent that knew the name of
// another agent's consumer could pull from it. The names end in a random
// part (nats.go's ordered consumer, see the agent) that nothing an agent
// can reach reveals.
//
// Requests whose reply subject is not the agent's (ReplyAllowed) are
// dropped. Each request is answered before the next is read; a forward
// waits at most timeout for JetStream.
func ServeGateway(nc *nats.Conn, queue string, timeout time.Duration, hooks GatewayHooks) (*nats.Subscription, error) {
	g := &gateway{nc: nc, timeout: timeout, hooks: hooks, admitted: admission.New(admission.Bounds{Burst: gatewayBurst, Every: gatewayEvery})}
	if g.hooks.Now == nil {
		g.hooks.Now = time.Now
	}
	sub, err := nc.QueueSubscribe(GatewaySubjectAll, queue, g.handle)
	if err != nil {
		return nil, fmt.Errorf("subscribe %s: %w", GatewaySubjectAll, err)
	}
	return sub, nil
}

type gateway struct {
	nc       *nats.Conn
	timeout  time.Duration
	hooks    GatewayHooks
	admitted *admission.Admissions
}

func (g *gateway) handle(m *nats.Msg) {
	tok := strings.Split(strings.TrimPrefix(m.Subject, gatewayPrefix), ".")
	if len(tok) < 2 || protocol.ValidateName("id", tok[0]) != nil {
		g.drop(m.Subject, DropSubject)
		return
	}
	id, op := tok[0], tok[1]
	if !ReplyAllowed(id, m.Reply) {
		g.drop(m.Subject, DropReply)
		return
	}
	switch {
	case op == OpInfo && len(tok) == 2:
		g.respond(m, server.JSApiAccountInfoResponse{ApiResponse: server.ApiResponse{
			Type: server.JSApiAccountInfoResponseType, Error: server.NewJSNotEnabledForAccountError()}})
	case op == OpCreate && len(tok) == 3:
		name := tok[2]
		body, err := ValidateConsumerCreate(id, name, m.Data)
		if err != nil {
			g.refuse(m, id, server.JSApiConsumerCreateResponseType, err)
			return
		}
		g.forwardAdmitted(m, id, "$JS.API.CONSUMER.CREATE."+protocol.StreamCommands+"."+name+"."+protocol.CommandSubject(id), body)
	case op == OpDelete && len(tok) == 3:
		name := tok[2]
		if !ownConsumer(id, name) {
			g.refuse(m, id, server.JSApiConsumerDeleteResponseType, consumerNameErr(id, name))
			return
		}
		g.forwardAdmitted(m, id, "$JS.API.CONSUMER.DELETE."+protocol.StreamCommands+"."+name, nil)
	default:
		g.drop(m.Subject, DropSubject)
	}
}

func (g *gateway) drop(subject, reason string) {
	if g.hooks.Dropped != nil {
		g.hooks.Dropped(subject, reason)
	}
}

func (g *gateway) refuse(m *nats.Msg, id, typ string, err error) {
	if g.hooks.Refused != nil {
		g.hooks.Refused(id, err)
	}
	g.respond(m, server.ApiResponse{Type: typ, Error: &server.ApiError{
		Code: 403, ErrCode: uint16(server.JSBadRequestErr), Description: "ax: " + err.Error()}})
}

// forwardAdmitted forwards agent id's request if its bounds admit it,
// else answers it with an error (429) naming the wait.
func (g *gateway) forwardAdmitted(m *nats.Msg, id, subject string, body []byte) {
	ok, wait := g.admitted.Admit(id, g.hooks.Now())
	if !ok {
		if g.hooks.Limited != nil {
			g.hooks.Limited(id)
		}
		g.respond(m, server.ApiResponse{Type: server.JSApiSystemResponseType, Error: &server.ApiError{
			Code: 429, Description: fmt.Sprintf("ax: too many consumer requests of agent %s; retry in %s", id, wait.Round(time.Millisecond))}})
		return
	}
	defer g.admitted.Release(id) // one at a time: nothing of it waits
	g.forward(m, subject, body)
}

func (g *gateway) forward(m *nats.Msg, subject string, body []byte) {
	r, err := g.nc.Request(subject, body, g.timeout)
	if err != nil {
		g.respond(m, server.ApiResponse{Type: server.JSApiSystemResponseType, Error: &server.ApiError{
			Code: 503, Description: "ax: jetstream request failed: " + err.Error()}})
		return
	}
	_ = m.Respond(r.Data)
}

func (g *gateway) respond(m *nats.Msg, v any) {
	if data, err := json.Marshal(v); err == nil {
		_ = m.Respond(data)
	}
}

func ownConsumer(id, name string) bool {
	p := protocol.CommandConsumerPrefix(id)
	return len(name) > len(p) && strings.HasPrefix(name, p)
}

func consumerNameErr(id, name string) error {
	return fmt.Errorf("%w: consumer name %q: must start with %q", ErrInvalid, name, protocol.CommandConsumerPrefix(id))
}

// ValidateConsumerCreate checks the body of agent id's request to create
// consumer name on AX_CMD and returns the request to forward, encoded
// again from what was checked. Allowed: an ephemeral pull consumer filtered
// to ax.cmd.<id> with ack policy none, instant replay, at most one replica
// and an inactive threshold of at most MaxConsumerIdle; its start
// (deliver policy, sequence, time), description, metadata, headers-only
// and storage are free. Any other field set (deliver_subject,
// deliver_group, idle_heartbeat, flow_control, durable_name, direct,
// sourcing, filter_subjects, …) is refused. Errors wrap ErrInvalid and
// name the field.
func ValidateConsumerCreate(id, name string, body []byte) ([]byte, error) {
	if !ownConsumer(id, name) {
		return nil, consumerNameErr(id, name)
	}
	var req server.CreateConsumerRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("%w: body: %w", ErrInvalid, err)
	}
	// nats-server decodes every JSON value in the body, the last one
	// winning; only one is forwarded, so only one is accepted.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: body: data after the request", ErrInvalid)
	}
	c := req.Config
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: config.%s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
	}
	switch {
	case req.Stream != protocol.StreamCommands:
		return nil, fmt.Errorf("%w: stream_name: must be %s, got %q", ErrInvalid, protocol.StreamCommands, req.Stream)
	case c.Name != "" && c.Name != name:
		return nil, bad("name", "%q differs from the subject's %q", c.Name, name)
	case c.FilterSubject != protocol.CommandSubject(id):
		return nil, bad("filter_subject", "must be %s, got %q", protocol.CommandSubject(id), c.FilterSubject)
	case c.AckPolicy != server.AckNone:
		return nil, bad("ack_policy", "must be none")
	case c.ReplayPolicy != server.ReplayInstant:
		return nil, bad("replay_policy", "must be instant")
	case c.Replicas > 1:
		return nil, bad("num_replicas", "must be at most 1, got %d", c.Replicas)
	case c.InactiveThreshold <= 0 || c.InactiveThreshold > MaxConsumerIdle:
		return nil, bad("inactive_threshold", "must be between 1ns and %s, got %s", MaxConsumerIdle, c.InactiveThreshold)
	}
	rest := c
	rest.Name, rest.Description, rest.Metadata = "", "", nil
	rest.DeliverPolicy, rest.OptStartSeq, rest.OptStartTime = 0, 0, nil
	rest.AckPolicy, rest.ReplayPolicy, rest.FilterSubject = 0, 0, ""
	rest.HeadersOnly, rest.InactiveThreshold, rest.Replicas, rest.MemoryStorage = false, 0, 0, false
	if f := firstSetField(rest); f != "" {
		return nil, bad(f, "not allowed for an agent's consumer")
	}
	req.Config.Name = name
	out, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("%w: body: %w", ErrInvalid, err)
	}
	return out, nil
}

// firstSetField returns the JSON name of the first non-zero field of c.
func firstSetField(c server.ConsumerConfig) string {
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		if !v.Field(i).IsZero() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return ""
}
