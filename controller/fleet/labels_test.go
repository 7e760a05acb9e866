package fleet

import (
	"testing"

	"github.com/axsched/ax/pkg/protocol"
)

// TestFirstRegistrationLabelsWithoutAuth: without enrollment (nats.auth
// none) the first registration's labels are taken once; later ones do not
// change them.
func TestFirstRegistrationLabelsWithoutAuth(t *testing.T) {
	c := newTestFleet(t)
	a := newTestAgent(t, c.url, "demo-1", map[string]string{"site": "hq"}).start()
	if got, _ := c.agents.Get("demo-1"); got.Labels["site"] != "hq" || got.LabelsFrom != protocol.LabelsFromRegistration {
		t.Fatalf("first registration: %+v", got)
	}
	a.labels = map[string]string{"site": "plant-3"}
	if rr := a.register(); rr.Labels["site"] != "hq" {
		t.Fatalf("reply labels = %v", rr.Labels)
	}
	if got, _ := c.agents.Get("demo-1"); got.Labels["site"] != "hq" {
		t.Fatalf("second registration changed the labels: %v", got.Labels)
	}
	// A record of an older controller (no labels_from) keeps its labels.
	old, _ := c.agents.Get("demo-1")
	old.LabelsFrom = ""
	c.agents.put(old)
	if rr := a.register(); rr.Labels["site"] != "hq" {
		t.Fatalf("older record: reply labels = %v", rr.Labels)
	}
	if got, _ := c.agents.Get("demo-1"); got.Labels["site"] != "hq" || got.LabelsFrom != protocol.LabelsFromRegistration {
		t.Fatalf("older record after a registration: %+v", got)
	}
}
