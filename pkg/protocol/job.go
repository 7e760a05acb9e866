package protocol

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/pkg/retry"
	"github.com/axsched/ax/pkg/schedule"
)

// Limits on a job.
const (
	// MaxPayloadSize bounds a job's payload (32 KiB). Bigger data: store a reference.
	MaxPayloadSize = 32 << 10
	// MaxJobNameLen bounds a job's name.
	MaxJobNameLen = 128
	// MaxIdempotencyKeyLen bounds an idempotency key.
	MaxIdempotencyKeyLen = 256
	// MaxPriority is the highest priority; 0 is the lowest.
	MaxPriority = 9
	// MaxTimeout bounds a job's per-attempt timeout.
	MaxTimeout = 7 * 24 * time.Hour
)

// Target modes of a group job.
const (
	// ModeAny runs each fire on one agent of the group, which holds a lease.
	ModeAny = "any"
	// ModeAll broadcasts: every agent of the group runs each fire with its shard index/total.
	ModeAll = "all"
)

// Overlap policies: what a fire does while the previous execution still runs.
const (
	OverlapForbid = "forbid" // the fire is recorded SKIPPED (default)
	OverlapQueue  = "queue"  // the fire waits for the previous one
	OverlapAllow  = "allow"  // the fire runs alongside (up to concurrency)
)

// Precisions: the wheel a job's fires are planned on.
const (
	PrecisionNormal = "normal" // 10 ms wheel (default)
	PrecisionFine   = "fine"   // 1 ms lane
)

// Target says where a job runs: exactly one of Agent or Group.
type Target struct {
	// Agent pins the job to one agent: it runs there, offline too, and is never moved.
	Agent string `json:"agent,omitempty" yaml:"agent,omitempty"`
	// Group selects agents by labels, "site=plant-3[,k=v]".
	Group string `json:"group,omitempty" yaml:"group,omitempty"`
	// Mode is ModeAny (default) or ModeAll; only with Group.
	Mode string `json:"mode,omitempty" yaml:"mode,omitempty"`
}

// RetrySpec is a job's retry policy as written (see retry.Policy).
type RetrySpec struct {
	MaxAttempts int      `json:"max_attempts,omitempty" yaml:"max_attempts,omitempty"`
	Base        Duration `json:"base,omitempty" yaml:"base,omitempty"`
	Max         Duration `json:"max,omitempty" yaml:"max,omitempty"`
	Jitter      Duration `json:"jitter,omitempty" yaml:"jitter,omitempty"`
	OnTimeout   bool     `json:"on_timeout,omitempty" yaml:"on_timeout,omitempty"`
}

// Policy converts the spec to a retry.Policy.
func (r RetrySpec) Policy() retry.Policy {
	return retry.Policy{MaxAttempts: r.MaxAttempts, Base: r.Base.D(), Max: r.Max.D(), Jitter: r.Jitter.D(), OnTimeout: r.OnTimeout}
}

// MisfireSpec is a job's misfire policy as written (see schedule.Misfire).
type MisfireSpec struct {
	Policy string   `json:"policy,omitempty" yaml:"policy,omitempty"`
	Grace  Duration `json:"grace,omitempty" yaml:"grace,omitempty"`
	Cap    int      `json:"cap,omitempty" yaml:"cap,omitempty"`
}

// Misfire converts the spec to a schedule.Misfire.
func (m MisfireSpec) Misfire() schedule.Misfire {
	return schedule.Misfire{Policy: schedule.MisfirePolicy(m.Policy), Grace: m.Grace.D(), Cap: m.Cap}
}

// Job is a job spec (docs/architecture.md: Jobs). JSON and YAML use the same field names.
type Job struct {
	// ID is made by the controller (NewJobID); empty in a create request.
	ID string `json:"id,omitempty" yaml:"id,omitempty"`
	// Name is a label for people, 1..128 printable characters.
	Name string `json:"name" yaml:"name"`
	// Handler is "exec", "http" or the name of a Go handler registered in an embedding program.
	Handler string `json:"handler" yaml:"handler"`
	// Payload is the handler's input, any JSON value of at most MaxPayloadSize bytes.
	Payload json.RawMessage `json:"payload,omitempty" yaml:"-"`
	// Schedule says when the job fires.
	Schedule schedule.Spec `json:"schedule" yaml:"schedule"`
	// Target says where it runs.
	Target Target `json:"target" yaml:"target"`
	// Priority is 0..9, higher first.
	Priority int `json:"priority,omitempty" yaml:"priority,omitempty"`
	// Timeout bounds each attempt; 0 means no timeout.
	Timeout Duration `json:"timeout,omitempty" yaml:"timeout,omitempty"`
	// Retry is the retry policy.
	Retry RetrySpec `json:"retry,omitempty" yaml:"retry,omitempty"`
	// Misfire is the misfire policy after downtime.
	Misfire MisfireSpec `json:"misfire,omitempty" yaml:"misfire,omitempty"`
	// Overlap is forbid (default), queue or allow.
	Overlap string `json:"overlap,omitempty" yaml:"overlap,omitempty"`
	// Concurrency limits parallel executions of this job on one agent; 0 means 1.
	Concurrency int `json:"concurrency,omitempty" yaml:"concurrency,omitempty"`
	// IdempotencyKey is unique across live jobs: a second submit returns the existing job.
	IdempotencyKey string `json:"idempotency_key,omitempty" yaml:"idempotency_key,omitempty"`
	// Precision is normal (default) or fine.
	Precision string `json:"precision,omitempty" yaml:"precision,omitempty"`
	// Paused jobs do not fire.
	Paused bool `json:"paused,omitempty" yaml:"paused,omitempty"`
	// Generation counts updates; agents keep the highest they have seen.
	Generation uint64 `json:"generation,omitempty" yaml:"generation,omitempty"`
	// CreatedAt is when the controller accepted the job; it anchors asap/delay/every.
	CreatedAt time.Time `json:"created_at,omitzero" yaml:"created_at,omitempty"`
}

// Periodic reports whether the job fires repeatedly (schedule every or
// cron); a one-shot job (asap, at, delay) runs once.
func (j Job) Periodic() bool {
	switch j.Schedule.Kind() {
	case schedule.KindEvery, schedule.KindCron:
		return true
	}
	return false
}

// GroupAny reports whether the job is a periodic job of a group that one
// of its agents at a time runs, under a lease (Target.Group, mode any).
func (j Job) GroupAny() bool {
	return j.Periodic() && j.Target.Agent == "" && j.Target.Group != "" && j.Target.Mode != ModeAll
}

// WithDefaults returns a copy of j with unset policy fields given their defaults.
func (j Job) WithDefaults() Job {
	if j.Target.Group != "" && j.Target.Mode == "" {
		j.Target.Mode = ModeAny
	}
	if j.Overlap == "" {
		j.Overlap = OverlapForbid
	}
	if j.Misfire.Policy == "" {
		j.Misfire.Policy = string(schedule.FireOnce)
	}
	if j.Precision == "" {
		j.Precision = PrecisionNormal
	}
	p := j.Retry.Policy().WithDefaults()
	j.Retry.MaxAttempts, j.Retry.Base, j.Retry.Max = p.MaxAttempts, Duration(p.Base), Duration(p.Max)
	if j.Concurrency == 0 {
		j.Concurrency = 1
	}
	return j
}

// Validate checks every field of a job; the error names the first bad field.
// An empty ID is allowed (a create request); a set one must have the form of NewJobID.
func (j Job) Validate() error {
	if j.ID != "" {
		if err := ValidateJobID("id", j.ID); err != nil {
			return err
		}
	}
	if j.Name == "" {
		return invalid("name", "is required")
	}
	if len(j.Name) > MaxJobNameLen || !utf8.ValidString(j.Name) {
		return invalid("name", "must be valid UTF-8 of at most %d bytes", MaxJobNameLen)
	}
	for _, r := range j.Name {
		if r < 0x20 || r == 0x7f {
			return invalid("name", "must not contain control characters")
		}
	}
	if err := ValidateName("handler", j.Handler); err != nil {
		return err
	}
	if err := validatePayload(j.Payload); err != nil {
		return err
	}
	if err := j.Schedule.Validate(); err != nil {
		return fromPkg(err)
	}
	if err := j.Target.Validate(); err != nil {
		return err
	}
	if j.Priority < 0 || j.Priority > MaxPriority {
		return invalid("priority", "must be between 0 and %d, got %d", MaxPriority, j.Priority)
	}
	if j.Timeout < 0 || j.Timeout.D() > MaxTimeout {
		return invalid("timeout", "must be between 0 and %s, got %s", MaxTimeout, j.Timeout)
	}
	// Zero fields take their defaults first, so that "max_attempts: 3, base: 50ms"
	// without max is valid (max defaults to max(5m, base)).
	if err := j.Retry.Policy().WithDefaults().Validate(); err != nil {
		return fromPkg(err)
	}
	if err := j.Misfire.Misfire().Validate(); err != nil {
		return fromPkg(err)
	}
	switch j.Overlap {
	case "", OverlapForbid, OverlapQueue, OverlapAllow:
	default:
		return invalid("overlap", "must be forbid, queue or allow, got %q", j.Overlap)
	}
	if j.Concurrency < 0 || j.Concurrency > 1024 {
		return invalid("concurrency", "must be between 0 and 1024, got %d", j.Concurrency)
	}
	if len(j.IdempotencyKey) > MaxIdempotencyKeyLen || !utf8.ValidString(j.IdempotencyKey) {
		return invalid("idempotency_key", "must be valid UTF-8 of at most %d bytes", MaxIdempotencyKeyLen)
	}
	switch j.Precision {
	case "", PrecisionNormal, PrecisionFine:
	default:
		return invalid("precision", "must be normal or fine, got %q", j.Precision)
	}
	return nil
}

// Validate checks a target: exactly one of agent or group; mode only with group.
func (t Target) Validate() error {
	switch {
	case t.Agent == "" && t.Group == "":
		return invalid("target", "one of target.agent or target.group is required")
	case t.Agent != "" && t.Group != "":
		return invalid("target", "target.agent and target.group are exclusive")
	case t.Agent != "":
		if t.Mode != "" {
			return invalid("target.mode", "is only valid with target.group")
		}
		return ValidateName("target.agent", t.Agent)
	}
	if _, err := ParseSelector("target.group", t.Group); err != nil {
		return err
	}
	switch t.Mode {
	case "", ModeAny, ModeAll:
		return nil
	default:
		return invalid("target.mode", "must be any or all, got %q", t.Mode)
	}
}

func validatePayload(p json.RawMessage) error {
	if len(p) == 0 {
		return nil
	}
	if len(p) > MaxPayloadSize {
		return fieldErrf(ErrTooLarge, "payload", "is %d bytes, at most %d allowed (store bigger data elsewhere and pass a reference)", len(p), MaxPayloadSize)
	}
	if !json.Valid(p) {
		return invalid("payload", "is not valid JSON")
	}
	return nil
}

// DecodeJob decodes and validates one job (an API request body). Unknown
// fields are rejected so that a typo does not silently become a default.
func DecodeJob(data []byte) (Job, error) { return Decoder{}.Job(data) }

// Job is DecodeJob with d.Fast tried first.
func (d Decoder) Job(data []byte) (Job, error) {
	var j Job
	if len(data) > MaxMessageSize {
		return j, fieldErrf(ErrTooLarge, "", "job is %d bytes, at most %d allowed", len(data), MaxMessageSize)
	}
	if err := strictUnmarshalWith(d.Fast, data, &j); err != nil {
		return Job{}, err
	}
	if err := j.Validate(); err != nil {
		return Job{}, err
	}
	return j, nil
}
