package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/axsched/ax/pkg/protocol"
)

// TestAgentLabel: enroll --label records the agent's labels on the
// controller; agent label sets (k=v) and removes (k-) them; agent ls shows
// them; bad arguments are usage errors naming the argument.
func TestAgentLabel(t *testing.T) {
	ctx := t.Context()
	apiURL, _ := authAPIServer(t)
	file := filepath.Join(t.TempDir(), "edge-1.nk")
	if code, _, e := run(ctx, "agent", "enroll", "edge-1", "--label", "site=lab", "--label", "rack=3", "-o", file, "--api", apiURL); code != ExitOK {
		t.Fatalf("enroll: %d %s", code, e)
	}
	code, out, e := run(ctx, "agent", "label", "edge-1", "role=pump", "rack-", "--api", apiURL)
	if code != ExitOK || strings.TrimSpace(out) != "agent edge-1 labels: role=pump,site=lab" {
		t.Fatalf("label: exit %d, out %q, err %q", code, out, e)
	}
	code, out, e = run(ctx, "agent", "ls", "--api", apiURL, "-o", "json")
	var agents []protocol.AgentInfo
	if code != ExitOK || json.Unmarshal([]byte(out), &agents) != nil || len(agents) != 1 {
		t.Fatalf("agent ls: %d %s %s", code, out, e)
	}
	if a := agents[0]; a.Agent != "edge-1" || len(a.Labels) != 2 || a.Labels["role"] != "pump" || a.LabelsFrom != protocol.LabelsFromOperator || a.Online {
		t.Fatalf("agent ls: %+v", a)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"agent", "label", "edge-1"}, ExitUsage, "at least one"},
		{[]string{"agent", "label", "edge-1", "role"}, ExitUsage, `"role" is neither`},
		{[]string{"agent", "label", "edge-1", "bad key=x"}, ExitUsage, "set"},
		{[]string{"agent", "label", "edge-1", "a=1", "a-"}, ExitUsage, "both set and removed"},
		{[]string{"agent", "label", "nobody", "a=1"}, ExitError, "not found"},
	} {
		code, _, e := run(ctx, append(tc.args, "--api", apiURL)...)
		if code != tc.code || !strings.Contains(e, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, e, tc.code, tc.want)
		}
	}
}
