package cli

import (
	"errors"
	"testing"

	"github.com/axsched/ax/pkg/protocol"
)

// TestParseJobsNamesNestedField: a bad or unknown field deep in a job
// file is named with its full path, list index included.
func TestParseJobsNamesNestedField(t *testing.T) {
	tests := []struct {
		name, content, field string
	}{
		{"unknown schedule key", "name: x\nhandler: sync\nschedule: {evry: 1m}\ntarget: {agent: a1}\n", "schedule.evry"},
		{"unknown retry key in a list", "jobs:\n  - {name: a, handler: sync, schedule: {every: 1m}, target: {agent: a1}}\n" +
			"  - {name: b, handler: sync, schedule: {every: 1m}, target: {agent: a1}, retry: {max_atempts: 2}}\n", "jobs[1].retry.max_atempts"},
		{"unknown target key", "name: x\nhandler: sync\nschedule: {every: 1m}\ntarget: {agent: a1, grup: x}\n", "target.grup"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJobs("jobs.yaml", []byte(tc.content))
			var fe *protocol.FieldError
			if !errors.As(err, &fe) || !errors.Is(err, protocol.ErrInvalid) || fe.Field != tc.field {
				t.Fatalf("err = %v, want a field error on %s", err, tc.field)
			}
		})
	}
}
