package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/axsched/ax/pkg/protocol"
)

// FuzzParseJobs: any job file either parses into valid jobs or fails with
// an error, never a panic; a FieldError always names its field.
func FuzzParseJobs(f *testing.F) {
	f.Add("name: x\nhandler: exec\nschedule: {every: 1m}\ntarget: {agent: a1}\n")
	f.Add("jobs:\n  - {name: x, handler: exec, schedule: {cron: \"* * * * *\"}, target: {group: \"site=a\", mode: all}}\n")
	f.Add("---\nname: a\n---\nname: b\n")
	f.Add("jobs: {a: 1}\n")
	f.Add("? [a, b]\n: c\n")
	f.Add("name: x\npayload: {1: 2}\n")
	f.Fuzz(func(t *testing.T, data string) {
		jobs, err := ParseJobs("f.yaml", []byte(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			var fe *protocol.FieldError
			if errors.As(err, &fe) && !errors.Is(err, protocol.ErrInvalid) && !errors.Is(err, protocol.ErrTooLarge) {
				t.Fatalf("field error without sentinel: %v", err)
			}
			return
		}
		for _, j := range jobs {
			if err := j.Job.Validate(); err != nil {
				t.Fatalf("%s: parsed job does not validate: %v", j.Source, err)
			}
		}
	})
}
