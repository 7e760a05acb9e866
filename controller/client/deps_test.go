package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientLinksNoServer: a program that imports the client links
// neither the controller nor nats-server (the API types are in
// pkg/apiv1).
func TestClientLinksNoServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/axsched/ax/controller/client").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/nats-io/nats-server") || dep == "github.com/axsched/ax/controller" ||
			strings.HasPrefix(dep, "github.com/axsched/ax/controller/auth") {
			t.Errorf("the client links %s", dep)
		}
	}
}
