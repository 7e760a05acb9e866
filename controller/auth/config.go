package auth

import (
	"fmt"
	"strings"
)

// ServerConfigUser renders the nats-server configuration entry of one
// agent user (for the users list of an authorization or account block of
// an external server): its NKey and its AgentGrants.
func ServerConfigUser(id, publicKey string) string {
	g := AgentGrants(id)
	var b strings.Builder
	fmt.Fprintf(&b, "# ax agent %s\n", id)
	fmt.Fprintf(&b, "{\n  nkey: %s\n  permissions: {\n", publicKey)
	fmt.Fprintf(&b, "    publish: { allow: [%s] }\n", quoteList(g.Publish))
	fmt.Fprintf(&b, "    subscribe: { allow: [%s] }\n", quoteList(g.Subscribe))
	b.WriteString("  }\n}\n")
	return b.String()
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = `"` + s + `"`
	}
	return strings.Join(q, ", ")
}
