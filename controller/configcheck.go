package controller

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/controller/lease"
	"github.com/axsched/ax/internal/streams"
	"github.com/axsched/ax/pkg/protocol"
	"github.com/nats-io/nats.go/jetstream"
)

// ConfigError is an invalid Config value. errors.Is(err, ErrConfig) is
// true; Key names the value as in the YAML file ("nats.port").
type ConfigError struct {
	// Key is the configuration key, dotted ("nats.tls.ca_file").
	Key string
	// Reason says what is wrong, with the value given.
	Reason string
}

// Error returns "invalid controller config: key: reason".
func (e *ConfigError) Error() string { return ErrConfig.Error() + ": " + e.Key + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

func configErr(key, format string, args ...any) error {
	return &ConfigError{Key: key, Reason: fmt.Sprintf(format, args...)}
}

// checkDataDir refuses a data_dir that cannot be a directory (a file, or
// below one): the embedded server would otherwise fail to start and be
// reported, after a 30s wait, as a port problem. A missing directory is
// fine: it is created.
func checkDataDir(dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return configErr("data_dir", "%q cannot be used as a directory: %v", dir, err)
	case !st.IsDir():
		return configErr("data_dir", "%q is a file, not a directory", dir)
	}
	return nil
}

// Validate checks the config after defaults are applied to zero values;
// the error wraps ErrConfig and names the key ("nats.port: ...").
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := protocol.ValidateName("node", c.Node); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if c.NATS.URL == "" {
		if strings.TrimSpace(c.DataDir) == "" {
			return configErr("data_dir", "is required when nats.url is empty (embedded server)")
		}
		if err := checkDataDir(c.DataDir); err != nil {
			return err
		}
		if c.NATS.Auth != auth.ModeNKeys && !isLoopback(c.NATS.Host) {
			return configErr("nats.host", "%q is not a loopback address; binding NATS beyond loopback without auth is refused (set nats.auth: nkeys)", c.NATS.Host)
		}
	} else {
		// One URL, or several (the nodes of a cluster) separated by commas.
		for _, one := range strings.Split(c.NATS.URL, ",") {
			one = strings.TrimSpace(one)
			u, err := url.Parse(one)
			if err != nil || u.Host == "" || strings.Contains(u.Host, ",") {
				return configErr("nats.url", "%q is not a URL such as nats://host:4222 (several: comma-separated)", one)
			}
			switch u.Scheme {
			case "nats", "tls", "ws", "wss":
			default:
				return configErr("nats.url", "scheme %q: want nats, tls, ws or wss", u.Scheme)
			}
		}
	}
	if c.NATS.Port < -1 || c.NATS.Port > 65535 {
		return configErr("nats.port", "must be between -1 and 65535, got %d", c.NATS.Port)
	}
	if err := auth.ValidateMode(c.NATS.Auth); err != nil {
		return configErr("nats.auth", "must be %q or %q, got %q", auth.ModeNone, auth.ModeNKeys, c.NATS.Auth)
	}
	if c.NATS.Auth == auth.ModeNKeys && c.NATS.URL != "" {
		return configErr("nats.auth", "nkeys applies to the embedded server; an external server's users are configured there (see controller/auth)")
	}
	if err := c.NATS.TLS.validate(c.NATS.URL == ""); err != nil {
		return err
	}
	if c.NATS.CredsFile != "" && c.NATS.URL == "" {
		return configErr("nats.creds_file", "is only used with nats.url")
	}
	switch c.NATS.Replicas {
	case 1, 3, 5:
	default:
		return configErr("nats.replicas", "must be 1, 3 or 5, got %d", c.NATS.Replicas)
	}
	if c.NATS.URL == "" && c.NATS.Replicas != 1 {
		return configErr("nats.replicas", "must be 1 with the embedded server, got %d", c.NATS.Replicas)
	}
	if c.Shards < 1 || c.Shards > protocol.MaxShards {
		return configErr("shards", "must be between 1 and %d, got %d", protocol.MaxShards, c.Shards)
	}
	if c.HeartbeatInterval < 100*time.Millisecond || c.HeartbeatInterval > time.Hour {
		return configErr("heartbeat_interval", "must be between 100ms and 1h, got %s", c.HeartbeatInterval)
	}
	if c.AgentOfflineAfter < c.HeartbeatInterval {
		return configErr("agent_offline_after", "must be at least heartbeat_interval (%s), got %s", c.HeartbeatInterval, c.AgentOfflineAfter)
	}
	if c.LeaseTTL < 500*time.Millisecond || c.LeaseTTL > time.Hour {
		return configErr("lease_ttl", "must be between 500ms and 1h, got %s", c.LeaseTTL)
	}
	if c.LeaseTTL < 2*c.HeartbeatInterval {
		return configErr("lease_ttl", "must be at least 2×heartbeat_interval (%s): agents renew their leases with heartbeats, got %s", 2*c.HeartbeatInterval, c.LeaseTTL)
	}
	if c.LeaseRenewInterval < 10*time.Millisecond || c.LeaseRenewInterval > c.LeaseTTL/2 {
		return configErr("lease_renew_interval", "must be between 10ms and lease_ttl/2 (%s), got %s", c.LeaseTTL/2, c.LeaseRenewInterval)
	}
	if c.AckWait < time.Second || c.AckWait > time.Hour {
		return configErr("ack_wait", "must be between 1s and 1h, got %s", c.AckWait)
	}
	if c.Reports.MaxBytes < streams.MinReportMaxBytes {
		return configErr("reports.max_bytes", "must be at least %d (1 MiB), got %d", streams.MinReportMaxBytes, c.Reports.MaxBytes)
	}
	if c.Reports.MaxPerSubject != 0 && c.Reports.MaxPerSubject < streams.MinReportMaxPerSubject {
		return configErr("reports.max_per_subject", "must be 0 (derived from reports.max_bytes) or at least %d, got %d", streams.MinReportMaxPerSubject, c.Reports.MaxPerSubject)
	}
	if c.Reports.MaxAge < streams.MinReportMaxAge {
		return configErr("reports.max_age", "must be at least %s, got %s", streams.MinReportMaxAge, c.Reports.MaxAge)
	}
	if c.Reports.DedupWindow < MinDedupWindow || c.Reports.DedupWindow > MaxDedupWindow {
		return configErr("reports.dedup_window", "must be between %s and %s, got %s", MinDedupWindow, MaxDedupWindow, c.Reports.DedupWindow)
	}
	if c.Reports.DedupWindow > c.Reports.MaxAge {
		return configErr("reports.dedup_window", "must be at most reports.max_age (%s): a stream cannot de-duplicate longer than it keeps messages, got %s", c.Reports.MaxAge, c.Reports.DedupWindow)
	}
	if c.History.Retention < time.Minute || c.History.Retention > streams.DefaultEventMaxAge {
		return configErr("history.retention", "must be between 1m and %s (AX_EVT keeps events that long and the history is rebuilt from it), got %s",
			streams.DefaultEventMaxAge, c.History.Retention)
	}
	if c.Forward.Timeout < MinForwardTimeout || c.Forward.Timeout > MaxForwardTimeout {
		return configErr("forward.timeout", "must be between %s and %s, got %s", MinForwardTimeout, MaxForwardTimeout, c.Forward.Timeout)
	}
	if c.Forward.Hold < MinForwardHold || c.Forward.Hold > MaxForwardHold {
		return configErr("forward.hold", "must be between %s and %s, got %s", MinForwardHold, MaxForwardHold, c.Forward.Hold)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkLeaseTTL refuses to start with a lease TTL other than the one live
// replicas use: a replica deciding that a lease lapsed after a shorter TTL
// than the one its holder was granted would let two holders fire. With no
// other replica live, the bucket's TTL is changed (by Ensure).
func (c *core) checkLeaseTTL(ctx context.Context) error {
	kv, err := c.js.KeyValue(ctx, protocol.BucketLeases)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read bucket %s: %w", protocol.BucketLeases, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return fmt.Errorf("read bucket %s: %w", protocol.BucketLeases, err)
	}
	if st.TTL() == c.cfg.LeaseTTL {
		return nil
	}
	keys, err := kv.ListKeysFiltered(ctx, lease.KeyReplicaPrefix+">")
	if err != nil {
		return fmt.Errorf("list replicas in %s: %w", protocol.BucketLeases, err)
	}
	var others []string
	for k := range keys.Keys() {
		if node := k[len(lease.KeyReplicaPrefix):]; node != c.cfg.Node {
			others = append(others, node)
		}
	}
	if len(others) > 0 {
		return configErr("lease_ttl", "%s, but live replicas %v use %s; every replica must use the same lease_ttl (stop them all to change it)",
			c.cfg.LeaseTTL, others, st.TTL())
	}
	c.log.Info("lease TTL changed", "from", st.TTL(), "to", c.cfg.LeaseTTL)
	return nil
}
