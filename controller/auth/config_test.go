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

// TestServerConfigUserParses: the snippet doc.go tells operators to use
// is read by nats-server into exactly the grants the embedded server uses.
func TestServerConfigUserParses(t *testing.T) {
	ctl, _, err := auth.NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, _, err := auth.NewUserKey()
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("jetstream: enabled\naccounts: {\n  AX: {\n    jetstream: enabled\n    users: [\n      { nkey: %s }\n%s    ]\n  }\n}\n",
		ctl, auth.ServerConfigUser("edge-a", pub))
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server rejects the snippet: %v\n%s", err, conf)
	}
	g := auth.AgentGrants("edge-a")
	i := slices.IndexFunc(opts.Nkeys, func(u *server.NkeyUser) bool { return u.Nkey == pub })
	if i < 0 {
		t.Fatalf("agent user missing in %+v", opts.Nkeys)
	}
	p := opts.Nkeys[i].Permissions
	if p == nil || !slices.Equal(p.Publish.Allow, g.Publish) || !slices.Equal(p.Subscribe.Allow, g.Subscribe) ||
		len(p.Publish.Deny) != 0 || len(p.Subscribe.Deny) != 0 {
		t.Fatalf("parsed permissions %+v %+v, want %+v", p.Publish, p.Subscribe, g)
	}
}

func ExampleServerConfigUser() {
	fmt.Print(auth.ServerConfigUser("edge-a", "UCZG3ZKTRKWKTCS7UYQQSZH6T6H2BMEKBHLCGRMVXC5KD744DETIWXRS"))
	// Output:
	// # ax agent edge-a
	// {
	//   nkey: UCZG3ZKTRKWKTCS7UYQQSZH6T6H2BMEKBHLCGRMVXC5KD744DETIWXRS
	//   permissions: {
	//     publish: { allow: ["ax.reg.edge-a", "ax.hb.edge-a", "ax.rpt.*.edge-a", "$JS.API.CONSUMER.CREATE.AX_CMD.*.ax.cmd.edge-a", "$JS.API.CONSUMER.MSG.NEXT.AX_CMD.*", "$JS.API.CONSUMER.DELETE.AX_CMD.*"] }
	//     subscribe: { allow: ["_INBOX_ax.edge-a.>"] }
	//   }
	// }
}
