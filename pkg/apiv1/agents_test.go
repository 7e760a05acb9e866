package apiv1

import "testing"

// TestAgentFilterValues: each set field is one query parameter of GET
// /v1/agents; zero fields are left out.
func TestAgentFilterValues(t *testing.T) {
	on := false
	for _, tt := range []struct {
		f    AgentFilter
		want string
	}{
		{AgentFilter{}, ""},
		{AgentFilter{Label: "site=a,role=pump"}, "label=site%3Da%2Crole%3Dpump"},
		{AgentFilter{Online: &on, Version: "1.2.0", Limit: 100, After: "edge-7"}, "after=edge-7&limit=100&online=false&version=1.2.0"},
	} {
		if got := tt.f.Values().Encode(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.f, got, tt.want)
		}
	}
}
