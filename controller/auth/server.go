package auth

import (
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
)

// Apply replaces the NKey users of a running server without a restart:
// it reloads a copy of base (the options the server was started with)
// whose Nkeys are users. The server closes the connections of users that
// are no longer present and applies changed permissions to live ones.
func Apply(srv *server.Server, base *server.Options, users []*server.NkeyUser) error {
	o := *base
	o.Nkeys = users
	if err := srv.ReloadOptions(&o); err != nil {
		return fmt.Errorf("reload nats users: %w", err)
	}
	return nil
}
