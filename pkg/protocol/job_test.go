package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/pkg/schedule"
)

func scheduleEvery(d string) schedule.Spec { return schedule.Spec{Every: d} }

func TestJobValidateAcceptsGood(t *testing.T) {
	for name, mod := range map[string]func(*Job){
		"as is":          func(*Job) {},
		"no id":          func(j *Job) { j.ID = "" },
		"cron with zone": func(j *Job) { j.Schedule = schedule.Spec{Cron: "*/1 * * * *", Timezone: "Europe/Berlin"} },
		"group all":      func(j *Job) { j.Target = Target{Group: "site=plant-3", Mode: ModeAll} },
		"group default":  func(j *Job) { j.Target = Target{Group: "site=plant-3"} },
		"retry": func(j *Job) {
			j.Retry = RetrySpec{MaxAttempts: 3, Base: Duration(time.Second), Max: Duration(time.Minute)}
		},
		"retry base only": func(j *Job) { j.Retry = RetrySpec{MaxAttempts: 3, Base: Duration(50 * time.Millisecond)} },
		"retry big base":  func(j *Job) { j.Retry = RetrySpec{MaxAttempts: 3, Base: Duration(time.Hour)} },
		"payload string":  func(j *Job) { j.Payload = json.RawMessage(`"x"`) },
		"no payload":      func(j *Job) { j.Payload = nil },
		"max payload":     func(j *Job) { j.Payload = json.RawMessage(`"` + strings.Repeat("a", MaxPayloadSize-2) + `"`) },
	} {
		j := validJob()
		mod(&j)
		if err := j.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestJobValidateNamesField(t *testing.T) {
	for _, tc := range []struct {
		name     string
		mod      func(*Job)
		sentinel error
		field    string
	}{
		{"bad id", func(j *Job) { j.ID = "nope" }, ErrInvalid, "id"},
		{"no name", func(j *Job) { j.Name = "" }, ErrInvalid, "name"},
		{"long name", func(j *Job) { j.Name = strings.Repeat("n", MaxJobNameLen+1) }, ErrInvalid, "name"},
		{"control char", func(j *Job) { j.Name = "a\nb" }, ErrInvalid, "name"},
		{"no handler", func(j *Job) { j.Handler = "" }, ErrInvalid, "handler"},
		{"bad handler", func(j *Job) { j.Handler = "a.b" }, ErrInvalid, "handler"},
		{"big payload", func(j *Job) { j.Payload = json.RawMessage(`"` + strings.Repeat("a", MaxPayloadSize) + `"`) }, ErrTooLarge, "payload"},
		{"bad payload", func(j *Job) { j.Payload = json.RawMessage(`{`) }, ErrInvalid, "payload"},
		{"no target", func(j *Job) { j.Target = Target{} }, ErrInvalid, "target"},
		{"two targets", func(j *Job) { j.Target = Target{Agent: "a", Group: "s=x"} }, ErrInvalid, "target"},
		{"unsafe agent", func(j *Job) { j.Target = Target{Agent: "edge.7"} }, ErrInvalid, "target.agent"},
		{"mode on agent", func(j *Job) { j.Target = Target{Agent: "a", Mode: ModeAll} }, ErrInvalid, "target.mode"},
		{"bad mode", func(j *Job) { j.Target = Target{Group: "s=x", Mode: "some"} }, ErrInvalid, "target.mode"},
		{"bad group", func(j *Job) { j.Target = Target{Group: "site"} }, ErrInvalid, "target.group"},
		{"priority high", func(j *Job) { j.Priority = 10 }, ErrInvalid, "priority"},
		{"priority low", func(j *Job) { j.Priority = -1 }, ErrInvalid, "priority"},
		{"negative timeout", func(j *Job) { j.Timeout = Duration(-time.Second) }, ErrInvalid, "timeout"},
		{"huge timeout", func(j *Job) { j.Timeout = Duration(MaxTimeout + time.Second) }, ErrInvalid, "timeout"},
		{"bad overlap", func(j *Job) { j.Overlap = "sometimes" }, ErrInvalid, "overlap"},
		{"bad precision", func(j *Job) { j.Precision = "ultra" }, ErrInvalid, "precision"},
		{"negative concurrency", func(j *Job) { j.Concurrency = -1 }, ErrInvalid, "concurrency"},
		{"long idem key", func(j *Job) { j.IdempotencyKey = strings.Repeat("k", MaxIdempotencyKeyLen+1) }, ErrInvalid, "idempotency_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := validJob()
			tc.mod(&j)
			wantField(t, j.Validate(), tc.sentinel, tc.field)
		})
	}
}

func TestJobValidateDelegatesScheduleRetryMisfire(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mod    func(*Job)
		prefix string
	}{
		{"bad cron", func(j *Job) { j.Schedule = schedule.Spec{Cron: "* *"} }, "schedule.cron"},
		{"no schedule", func(j *Job) { j.Schedule = schedule.Spec{} }, "schedule"},
		{"bad zone", func(j *Job) { j.Schedule = schedule.Spec{Cron: "* * * * *", Timezone: "Mars/Base"} }, "schedule.timezone"},
		{"negative retry base", func(j *Job) { j.Retry = RetrySpec{MaxAttempts: 3, Base: Duration(-time.Second)} }, "retry."},
		{"bad misfire", func(j *Job) { j.Misfire = MisfireSpec{Policy: "maybe"} }, "misfire.policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := validJob()
			tc.mod(&j)
			err := j.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.prefix) {
				t.Fatalf("error %v, want one starting with %q", err, tc.prefix)
			}
			var fe *FieldError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) || !strings.HasPrefix(fe.Field, strings.TrimSuffix(tc.prefix, ".")) {
				t.Fatalf("error %#v is not a protocol *FieldError on %q", err, tc.prefix)
			}
		})
	}
}

func TestJobWithDefaults(t *testing.T) {
	j := Job{Target: Target{Group: "s=x"}}.WithDefaults()
	if j.Target.Mode != ModeAny || j.Overlap != OverlapForbid || j.Misfire.Policy != string(schedule.FireOnce) ||
		j.Precision != PrecisionNormal || j.Retry.MaxAttempts != 1 || j.Concurrency != 1 || j.Retry.Base.D() <= 0 || j.Retry.Max < j.Retry.Base {
		t.Fatalf("defaults not applied: %+v", j)
	}
	k := Job{Overlap: OverlapAllow, Concurrency: 4}.WithDefaults()
	if k.Overlap != OverlapAllow || k.Concurrency != 4 {
		t.Fatalf("set fields overwritten: %+v", k)
	}
}

func TestDecodeJob(t *testing.T) {
	good := `{"name":"n","handler":"exec","schedule":{"every":"5m"},"target":{"agent":"edge-7"},"timeout":"30s","retry":{"max_attempts":3,"base":"1s","max":"1m"}}`
	j, err := DecodeJob([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if j.Timeout.D() != 30*time.Second || j.Retry.Base.D() != time.Second || j.Schedule.Every != "5m" {
		t.Fatalf("decoded %+v", j)
	}
	for _, tc := range []struct {
		name, body string
		sentinel   error
		field      string
	}{
		{"unknown field", `{"name":"n","handler":"exec","schedule":{"every":"5m"},"target":{"agent":"a"},"handlr":"x"}`, ErrInvalid, "handlr"},
		{"unknown nested field", `{"name":"n","handler":"exec","schedule":{"evry":"5m"},"target":{"agent":"a"}}`, ErrInvalid, "schedule.evry"},
		{"bad duration", `{"name":"n","handler":"exec","schedule":{"every":"5m"},"target":{"agent":"a"},"timeout":"soon"}`, ErrInvalid, "timeout"},
		{"numeric duration", `{"name":"n","handler":"exec","schedule":{"every":"5m"},"target":{"agent":"a"},"retry":{"base":5}}`, ErrInvalid, "retry.base"},
		{"wrong type", `{"name":5}`, ErrInvalid, "name"},
		{"trailing", `{"name":"n"} {}`, ErrInvalid, ""},
		{"not json", `nope`, ErrInvalid, ""},
		{"empty", ``, ErrInvalid, ""},
		{"too large", `{"name":"` + strings.Repeat("a", MaxMessageSize) + `"}`, ErrTooLarge, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeJob([]byte(tc.body))
			wantField(t, err, tc.sentinel, tc.field)
		})
	}
}

func TestDurationJSON(t *testing.T) {
	b, err := json.Marshal(struct{ D Duration }{Duration(90 * time.Second)})
	if err != nil || string(b) != `{"D":"1m30s"}` {
		t.Fatalf("marshal = %s, %v", b, err)
	}
	var v struct{ D Duration }
	if err := json.Unmarshal([]byte(`{"D":"250ms"}`), &v); err != nil || v.D.D() != 250*time.Millisecond {
		t.Fatalf("unmarshal = %v, %v", v.D, err)
	}
	if err := json.Unmarshal([]byte(`{"D":0}`), &v); err != nil || v.D != 0 {
		t.Fatalf("zero = %v, %v", v.D, err)
	}
	// A string with escapes takes the decoder, not the plain-string path.
	if err := json.Unmarshal([]byte(`{"D":"\u0031m\u0035s"}`), &v); err != nil || v.D.D() != time.Minute+5*time.Second {
		t.Fatalf("escaped = %v, %v", v.D, err)
	}
	for _, bad := range []string{`{"D":"5 parsecs"}`, `{"D":"\"5s"}`, `{"D":5}`, `{"D":"5s\"}`} {
		if err := json.Unmarshal([]byte(bad), &v); err == nil {
			t.Errorf("%s decoded to %v, want an error", bad, v.D)
		}
	}
}

// TestJobPredicates: Periodic and GroupAny for each schedule kind and target.
func TestJobPredicates(t *testing.T) {
	grp := Target{Group: "site=plant-3"}
	for _, tc := range []struct {
		name               string
		spec               schedule.Spec
		target             Target
		periodic, groupAny bool
	}{
		{"every, group any", schedule.Spec{Every: "1m"}, grp, true, true},
		{"cron, group any", schedule.Spec{Cron: "*/5 * * * *"}, Target{Group: "site=a", Mode: ModeAny}, true, true},
		{"every, group all", schedule.Spec{Every: "1m"}, Target{Group: "site=a", Mode: ModeAll}, true, false},
		{"every, pinned", schedule.Spec{Every: "1m"}, Target{Agent: "edge-1"}, true, false},
		{"delay, group", schedule.Spec{Delay: "5m"}, grp, false, false},
		{"asap, pinned", schedule.Spec{}, Target{Agent: "edge-1"}, false, false},
		{"at", schedule.Spec{At: "2026-12-02T10:00:00Z"}, grp, false, false},
	} {
		j := Job{Schedule: tc.spec, Target: tc.target}
		if p, g := j.Periodic(), j.GroupAny(); p != tc.periodic || g != tc.groupAny {
			t.Errorf("%s: Periodic %v GroupAny %v, want %v %v", tc.name, p, g, tc.periodic, tc.groupAny)
		}
	}
}
