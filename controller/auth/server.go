package auth

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
)

// Configure sets the accounts and NKey users of o (the embedded server's
// options) to AccountsConfig(controllerKey, agents), read by nats-server's
// own configuration parser: an external server configured from the same
// text behaves the same.
func Configure(o *server.Options, controllerKey string, agents []Agent) error {
	var p server.Options
	if err := p.ProcessConfigString(AccountsConfig(controllerKey, agents)); err != nil {
		return fmt.Errorf("%w: nats accounts: %w", ErrInvalid, err)
	}
	o.Accounts, o.Nkeys, o.Users = p.Accounts, p.Nkeys, nil
	return nil
}

// Apply reconfigures the accounts and users of a running server without a
// restart: it reloads a copy of base (the options the server was started
// with) configured for controllerKey and agents. The server closes the
// connections of users that are gone or whose key changed.
//
// nats-server v2.15 does not subscribe the service imports of an account
// that a reload adds until the next reload (such an agent gets "no
// responders"), so when an agent account is new Apply reloads twice.
func Apply(srv *server.Server, base *server.Options, controllerKey string, agents []Agent) error {
	passes := 1
	for _, a := range agents {
		if _, err := srv.LookupAccount(AgentAccount(a.ID)); errors.Is(err, server.ErrMissingAccount) {
			passes = 2
			break
		}
	}
	for range passes {
		o := *base
		if err := Configure(&o, controllerKey, agents); err != nil {
			return err
		}
		if err := srv.ReloadOptions(&o); err != nil {
			return fmt.Errorf("reload nats accounts: %w", err)
		}
	}
	return nil
}
