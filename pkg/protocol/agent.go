package protocol

import (
	"time"
)

// MaxHandlers bounds the handler names an agent registers.
const MaxHandlers = 256

// HeldLease is a group-job lease an agent believes it holds.
type HeldLease struct {
	JobID string `json:"job_id"`
	Epoch uint64 `json:"epoch"`
}

// Register is an agent's registration request on ax.reg.<agent>, sent on
// every (re)connect.
type Register struct {
	V        int               `json:"v"`
	Agent    string            `json:"agent"`
	Labels   map[string]string `json:"labels,omitempty"`
	Handlers []string          `json:"handlers,omitempty"`
	// Version is the agent binary's version string.
	Version string `json:"version,omitempty"`
	OS      string `json:"os,omitempty"`
	Arch    string `json:"arch,omitempty"`
	// Cursor is the last command stream sequence the agent applied.
	Cursor uint64 `json:"cursor"`
	// SentAt is the agent's wall clock when sending, for offset estimation.
	SentAt time.Time `json:"sent_at"`
	// Leases are the group-job leases the agent held before reconnecting.
	Leases []HeldLease `json:"leases,omitempty"`
	// Boot names this run of the agent process (random, new at every
	// start); heartbeats carry it too, so that the controller can tell a
	// late message of a previous run from the current one.
	Boot string `json:"boot,omitempty"`
	// Fresh says the agent's store holds no command cursor: a new store,
	// or one that lost its state. The controller then tells it where to
	// resume (RegisterReply.ResumeAfter) instead of replaying commands
	// it already applied.
	Fresh bool `json:"fresh,omitempty"`
}

// RegisterReply is the controller's answer to Register.
type RegisterReply struct {
	V int `json:"v"`
	// Error is set when the registration is refused; the agent logs it and retries.
	Error string `json:"error,omitempty"`
	// ControllerTime is the controller's wall clock when replying.
	ControllerTime time.Time `json:"controller_time"`
	// Shards is the report shard count the agent must use in ReportSubject.
	Shards int `json:"shards"`
	// HeartbeatInterval is how often the controller wants heartbeats.
	HeartbeatInterval Duration `json:"heartbeat_interval,omitempty"`
	// Labels are the agent's labels as the controller holds them (set at
	// enrollment or by an operator); the registration's own labels do not
	// change them.
	Labels map[string]string `json:"labels,omitempty"`
	// ResumeAfter, when above the agent's cursor, is the command sequence
	// to resume after: the agent's store lost its state, the commands up
	// to it are not to be applied (they would re-run finished work), and
	// the controller re-sends the agent's assignments and pending runs
	// after it.
	ResumeAfter uint64 `json:"resume_after,omitempty"`
	// RetryAfter, with Error, is set when the controller is too busy to
	// handle the registration: the agent waits at least this long (plus
	// its own backoff) before it tries again.
	RetryAfter Duration `json:"retry_after,omitempty"`
}

// Stats are an agent's counters sent with each heartbeat.
type Stats struct {
	Pending     int      `json:"pending"`
	Running     int      `json:"running"`
	QueueDepth  int      `json:"queue_depth"`
	OutboxDepth int      `json:"outbox_depth"`
	LagP99      Duration `json:"lag_p99,omitempty"`
	// ClockOffset is the agent's estimate of controller time minus its own.
	ClockOffset Duration `json:"clock_offset,omitempty"`
	// SkewRefusing is true while the agent refuses to fire because its clock
	// is off by more than clock.max_skew.
	SkewRefusing bool `json:"skew_refusing,omitempty"`
}

// Heartbeat is an agent's liveness request on ax.hb.<agent>.
type Heartbeat struct {
	V      int       `json:"v"`
	Agent  string    `json:"agent"`
	SentAt time.Time `json:"sent_at"`
	Stats  Stats     `json:"stats"`
	// Leases are the agent's claims: every group job assigned to it with an
	// epoch. The reply renews those it still holds and names the lost ones.
	Leases []HeldLease `json:"leases,omitempty"`
	// Stopping says the agent is shutting down cleanly: it has stopped
	// firing and hands its leases back, so that they move at once.
	Stopping bool `json:"stopping,omitempty"`
	// Boot is the Register.Boot of the process sending the heartbeat.
	Boot string `json:"boot,omitempty"`
	// Cursor is the last command stream sequence the agent applied, as
	// its store holds it (committed, so a restart resumes after it); 0
	// when the agent does not say. Once the controller has stored it in
	// the agent's record it removes the agent's commands up to it from
	// AX_CMD, keeping the last (controller/cmdprune.go); an agent store
	// that comes back below it is taken as one that lost its state.
	Cursor uint64 `json:"cursor,omitempty"`
}

// HeartbeatReply is the controller's answer to Heartbeat. It carries
// controller time and the renewals of the agent's group-job leases.
type HeartbeatReply struct {
	V              int       `json:"v"`
	ControllerTime time.Time `json:"controller_time"`
	// Renewed are the leases renewed by this heartbeat (TTL from receipt).
	Renewed []Lease `json:"renewed,omitempty"`
	// Lost are the leases the agent reported but no longer holds.
	Lost []HeldLease `json:"lost,omitempty"`
	// Error is set when the controller refuses the heartbeat (e.g. unknown agent: register again).
	Error string `json:"error,omitempty"`
}

// Validate checks a registration.
func (r Register) Validate() error {
	if err := checkVersion(r.V); err != nil {
		return err
	}
	if err := ValidateName("agent", r.Agent); err != nil {
		return err
	}
	if err := ValidateLabels("labels", r.Labels); err != nil {
		return err
	}
	if len(r.Handlers) > MaxHandlers {
		return invalid("handlers", "has %d names, at most %d allowed", len(r.Handlers), MaxHandlers)
	}
	for _, h := range r.Handlers {
		if err := ValidateName("handlers", h); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, v string }{{"version", r.Version}, {"os", r.OS}, {"arch", r.Arch}} {
		if len(f.v) > 64 {
			return invalid(f.name, "is longer than 64 bytes")
		}
	}
	if r.SentAt.IsZero() {
		return invalid("sent_at", "is required")
	}
	if r.Fresh && r.Cursor != 0 {
		return invalid("fresh", "a store without a command cursor has cursor 0, got cursor %d", r.Cursor)
	}
	if r.Boot != "" {
		if err := ValidateName("boot", r.Boot); err != nil {
			return err
		}
	}
	return validateHeld("leases", r.Leases)
}

// Validate checks a registration reply.
func (r RegisterReply) Validate() error {
	if err := checkVersion(r.V); err != nil {
		return err
	}
	if r.Error != "" {
		return nil
	}
	if r.ControllerTime.IsZero() {
		return invalid("controller_time", "is required")
	}
	if r.Shards < 1 || r.Shards > MaxShards {
		return invalid("shards", "must be between 1 and %d, got %d", MaxShards, r.Shards)
	}
	if r.HeartbeatInterval < 0 {
		return invalid("heartbeat_interval", "must not be negative")
	}
	return ValidateLabels("labels", r.Labels)
}

// Validate checks a heartbeat.
func (h Heartbeat) Validate() error {
	if err := checkVersion(h.V); err != nil {
		return err
	}
	if err := ValidateName("agent", h.Agent); err != nil {
		return err
	}
	if h.SentAt.IsZero() {
		return invalid("sent_at", "is required")
	}
	if h.Boot != "" {
		if err := ValidateName("boot", h.Boot); err != nil {
			return err
		}
	}
	s := h.Stats
	for _, f := range []struct {
		name string
		v    int
	}{{"stats.pending", s.Pending}, {"stats.running", s.Running}, {"stats.queue_depth", s.QueueDepth}, {"stats.outbox_depth", s.OutboxDepth}} {
		if f.v < 0 {
			return invalid(f.name, "must not be negative")
		}
	}
	if s.LagP99 < 0 {
		return invalid("stats.lag_p99", "must not be negative")
	}
	return validateHeld("leases", h.Leases)
}

// Validate checks a heartbeat reply.
func (r HeartbeatReply) Validate() error {
	if err := checkVersion(r.V); err != nil {
		return err
	}
	if r.Error != "" {
		return nil
	}
	if r.ControllerTime.IsZero() {
		return invalid("controller_time", "is required")
	}
	for i, l := range r.Renewed {
		if err := l.validate(true); err != nil {
			return prefixed("renewed["+itoa(i)+"]", err)
		}
	}
	return validateHeld("lost", r.Lost)
}

func validateHeld(field string, ls []HeldLease) error {
	if len(ls) > 10000 {
		return invalid(field, "has %d leases, at most 10000 allowed", len(ls))
	}
	for i, l := range ls {
		f := field + "[" + itoa(i) + "]"
		if err := ValidateJobID(f+".job_id", l.JobID); err != nil {
			return err
		}
		if l.Epoch == 0 {
			return invalid(f+".epoch", "must be ≥ 1")
		}
	}
	return nil
}

// DecodeRegister decodes and validates a registration.
func DecodeRegister(data []byte) (Register, error) { return decodeAs[Register](data) }

// DecodeRegisterReply decodes and validates a registration reply.
func DecodeRegisterReply(data []byte) (RegisterReply, error) { return decodeAs[RegisterReply](data) }

// DecodeHeartbeat decodes and validates a heartbeat.
func DecodeHeartbeat(data []byte) (Heartbeat, error) { return decodeAs[Heartbeat](data) }

// DecodeHeartbeatReply decodes and validates a heartbeat reply.
func DecodeHeartbeatReply(data []byte) (HeartbeatReply, error) { return decodeAs[HeartbeatReply](data) }

// ClockOffset estimates controller time minus agent time from one
// request/reply exchange: the agent sent at t0 and received at t2 (its own
// clock), the controller replied at t1 (its clock). The estimate assumes a
// symmetric network delay and is off by at most half the round trip.
func ClockOffset(t0, t1, t2 time.Time) time.Duration {
	mid := t0.Add(t2.Sub(t0) / 2)
	return t1.Sub(mid)
}
