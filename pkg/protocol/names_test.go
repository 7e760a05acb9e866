package protocol

import (
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"edge-7", true}, {"A_b-9", true}, {"7", true}, {strings.Repeat("a", MaxNameLen), true},
		{"", false}, {strings.Repeat("a", MaxNameLen+1), false}, {"-lead", false}, {"_lead", false},
		{"a.b", false}, {"a*", false}, {"a>", false}, {"a b", false}, {"a/b", false}, {"ä", false}, {"a\x00", false},
	} {
		err := ValidateName("agent", tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil {
			wantField(t, err, ErrInvalid, "agent")
		}
	}
}

func TestValidateLabels(t *testing.T) {
	many := map[string]string{}
	for i := 0; i <= MaxLabels; i++ {
		many["k"+itoa(i)] = "v"
	}
	for _, tc := range []struct {
		labels map[string]string
		ok     bool
	}{
		{nil, true},
		{map[string]string{"site": "plant-3", "topology.ax.io/zone": "a.b", "empty": ""}, true},
		{map[string]string{"": "x"}, false},
		{map[string]string{"a b": "x"}, false},
		{map[string]string{"site": "plant 3"}, false},
		{map[string]string{"site": "a/b"}, false},
		{map[string]string{"site": strings.Repeat("v", MaxLabelValueLen+1)}, false},
		{map[string]string{strings.Repeat("k", MaxLabelKeyLen+1): "v"}, false},
		{many, false},
	} {
		err := ValidateLabels("labels", tc.labels)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateLabels(%v) = %v, want ok=%v", tc.labels, err, tc.ok)
		}
	}
}

func TestSelector(t *testing.T) {
	sel, err := ParseSelector("target.group", " site=plant-3 , role=valve")
	if err != nil {
		t.Fatal(err)
	}
	if got := sel.String(); got != "role=valve,site=plant-3" {
		t.Fatalf("String = %q", got)
	}
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"site": "plant-3", "role": "valve", "x": "y"}, true},
		{map[string]string{"site": "plant-3"}, false},
		{map[string]string{"site": "plant-4", "role": "valve"}, false},
		{nil, false},
	} {
		if got := sel.Matches(tc.labels); got != tc.want {
			t.Errorf("Matches(%v) = %v, want %v", tc.labels, got, tc.want)
		}
	}
	for _, bad := range []string{"", "site", "site=a,site=b", "=x", "a b=c", "site=a b"} {
		_, err := ParseSelector("target.group", bad)
		if err == nil {
			t.Errorf("ParseSelector(%q) accepted", bad)
			continue
		}
		wantField(t, err, ErrInvalid, "target.group")
	}
}
