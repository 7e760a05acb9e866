package auth

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axsched/ax/pkg/protocol"
)

// Modes of nats.auth.
const (
	// ModeNone runs the embedded server without authentication (loopback only).
	ModeNone = "none"
	// ModeNKeys gives the controller and every enrolled agent its own NKey user.
	ModeNKeys = "nkeys"
)

// ValidateMode checks a nats.auth value ("" means ModeNone).
func ValidateMode(mode string) error {
	switch mode {
	case "", ModeNone, ModeNKeys:
		return nil
	}
	return fmt.Errorf("%w: nats.auth: must be %q or %q, got %q", ErrInvalid, ModeNone, ModeNKeys, mode)
}

// Grants lists the subjects one NATS user may publish and subscribe to.
// It is the permission set of AgentGrants in a form that maps 1:1 to a
// nats-server config block or a user JWT (see doc.go).
type Grants struct {
	// Publish are the subjects the user may publish to.
	Publish []string
	// Subscribe are the subjects the user may subscribe to.
	Subscribe []string
}

// AgentGrants returns the least-privilege grants of agent id:
//
//   - publish its registration and heartbeat requests (ax.reg.<id>, ax.hb.<id>),
//     its reports on any shard (ax.rpt.*.<id>),
//   - create a consumer on AX_CMD only with the filter ax.cmd.<id> (the
//     filtered-create API subject; the server refuses a body whose filter
//     differs from the subject, and refuses multi-filter bodies on it),
//   - pull the next messages of a consumer of AX_CMD and delete one
//     ($JS.API.CONSUMER.MSG.NEXT.AX_CMD.*, $JS.API.CONSUMER.DELETE.AX_CMD.*:
//     the ordered consumer deletes its previous consumer when it resets;
//     consumer names are random and cannot be listed, see doc.go),
//   - subscribe only to its own reply inbox _INBOX_ax.<id>.> (replies,
//     PubAcks and pulled commands all arrive there).
//
// Nothing else: no _INBOX.>, no unfiltered or other-agent consumer, no
// stream, consumer or KV API, no events, no other agent's subjects.
func AgentGrants(id string) Grants {
	return Grants{
		Publish: []string{
			protocol.RegisterSubject(id),
			protocol.HeartbeatSubject(id),
			"ax.rpt.*." + id,
			"$JS.API.CONSUMER.CREATE." + protocol.StreamCommands + ".*." + protocol.CommandSubject(id),
			"$JS.API.CONSUMER.MSG.NEXT." + protocol.StreamCommands + ".*",
			"$JS.API.CONSUMER.DELETE." + protocol.StreamCommands + ".*",
		},
		Subscribe: []string{protocol.InboxPrefix(id) + ".>"},
	}
}

// Permissions converts g to nats-server permissions.
func (g Grants) Permissions() *server.Permissions {
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: append([]string(nil), g.Publish...)},
		Subscribe: &server.SubjectPermission{Allow: append([]string(nil), g.Subscribe...)},
	}
}

// Users returns the NKey users of the embedded server: the controller
// (controllerKey, unrestricted) and every agent with its AgentGrants.
func Users(controllerKey string, agents []Agent) []*server.NkeyUser {
	users := make([]*server.NkeyUser, 0, len(agents)+1)
	users = append(users, &server.NkeyUser{Nkey: controllerKey})
	for _, a := range agents {
		users = append(users, &server.NkeyUser{Nkey: a.PublicKey, Permissions: AgentGrants(a.ID).Permissions()})
	}
	return users
}
