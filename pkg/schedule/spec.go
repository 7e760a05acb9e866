package schedule

// Spec is a job's schedule as users write it (YAML/JSON, same field names).
// Exactly one of Asap, At, Delay, Every or Cron is set; Timezone applies to
// Cron only (IANA name, default UTC).
type Spec struct {
	// Asap fires once, as soon as possible after the job is created.
	Asap bool `json:"asap,omitempty" yaml:"asap,omitempty"`
	// At fires once at an RFC 3339 instant, e.g. "2026-12-01T02:00:00Z".
	At string `json:"at,omitempty" yaml:"at,omitempty"`
	// Delay fires once, this long after the job was created, e.g. "30m".
	Delay string `json:"delay,omitempty" yaml:"delay,omitempty"`
	// Every fires periodically with this period, e.g. "5m".
	Every string `json:"every,omitempty" yaml:"every,omitempty"`
	// Cron fires on a cron expression: 5 fields, an optional leading seconds
	// field (6 fields), or a descriptor such as "@hourly".
	Cron string `json:"cron,omitempty" yaml:"cron,omitempty"`
	// Timezone is the IANA zone Cron is evaluated in; empty means UTC.
	Timezone string `json:"timezone,omitempty" yaml:"timezone,omitempty"`
}
