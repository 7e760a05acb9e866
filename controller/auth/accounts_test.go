package auth_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/axsched/ax/controller/auth"
)

// TestAccountsConfigParses: the accounts block doc.go tells operators to
// use is read by nats-server's config file parser into the ax account and
// one account per agent, each agent user in its own account.
func TestAccountsConfigParses(t *testing.T) {
	ctl, _, err := auth.NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	var agents []auth.Agent
	for _, id := range []string{"edge-a", "edge_b-7"} {
		pub, _, err := auth.NewUserKey()
		if err != nil {
			t.Fatal(err)
		}
		agents = append(agents, auth.Agent{ID: id, PublicKey: pub})
	}
	conf := "jetstream: enabled\n" + auth.AccountsConfig(ctl, agents)
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server rejects the accounts block: %v\n%s", err, conf)
	}
	names := make([]string, 0, len(opts.Accounts))
	for _, a := range opts.Accounts {
		names = append(names, a.Name)
	}
	want := []string{auth.AccountAX, auth.AgentAccount("edge-a"), auth.AgentAccount("edge_b-7")}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("accounts %v, want %v", names, want)
	}
	users := map[string]string{}
	for _, u := range opts.Nkeys {
		users[u.Nkey] = u.Account.Name
		if u.Permissions != nil {
			t.Errorf("user %s has permissions %+v; the account is its limit", u.Nkey, u.Permissions)
		}
	}
	if users[ctl] != auth.AccountAX || users[agents[0].PublicKey] != auth.AgentAccount("edge-a") ||
		users[agents[1].PublicKey] != auth.AgentAccount("edge_b-7") {
		t.Fatalf("users in accounts %v", users)
	}
}

func ExampleAgentAccountConfig() {
	fmt.Print(auth.AgentAccountConfig("edge-a", "UCZG3ZKTRKWKTCS7UYQQSZH6T6H2BMEKBHLCGRMVXC5KD744DETIWXRS"))
	// Output:
	//   # ax agent edge-a
	//   "AGENT_edge-a": {
	//     users: [ { nkey: UCZG3ZKTRKWKTCS7UYQQSZH6T6H2BMEKBHLCGRMVXC5KD744DETIWXRS } ]
	//     limits: { max_connections: 8, max_subscriptions: 1000, max_payload: 131072 }
	//     imports: [
	//       { service: { account: AX, subject: "ax.reg.edge-a" } }
	//       { service: { account: AX, subject: "ax.hb.edge-a" } }
	//       { service: { account: AX, subject: "ax.rpt.*.edge-a" } }
	//       { service: { account: AX, subject: "$JS.API.CONSUMER.MSG.NEXT.AX_CMD.*" } }
	//       { service: { account: AX, subject: "ax.jsapi.edge-a.create.*" }, to: "$JS.API.CONSUMER.CREATE.AX_CMD.*.ax.cmd.edge-a" }
	//       { service: { account: AX, subject: "ax.jsapi.edge-a.delete.*" }, to: "$JS.API.CONSUMER.DELETE.AX_CMD.*" }
	//       { service: { account: AX, subject: "ax.jsapi.edge-a.info" }, to: "$JS.API.INFO" }
	//     ]
	//   }
}

func ExampleAXAccountConfig() {
	fmt.Print(auth.AXAccountConfig("{ nkey: UCZG3ZKTRKWKTCS7UYQQSZH6T6H2BMEKBHLCGRMVXC5KD744DETIWXRS }"))
	// Output:
	//   AX: {
	//     jetstream: enabled
	//     users: [
	//       { nkey: UCZG3ZKTRKWKTCS7UYQQSZH6T6H2BMEKBHLCGRMVXC5KD744DETIWXRS }
	//     ]
	//     exports: [
	//       { service: "ax.reg.*" }
	//       { service: "ax.hb.*" }
	//       { service: "ax.rpt.*.*", response_threshold: "5s" }
	//       { service: "$JS.API.CONSUMER.MSG.NEXT.AX_CMD.*", response_type: stream }
	//       { service: "ax.jsapi.>" }
	//     ]
	//   }
}
