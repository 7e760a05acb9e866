package cli

import (
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cast"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/axsched/ax/controller"
	"github.com/axsched/ax/controller/api"
	"github.com/axsched/ax/controller/auth"
	"github.com/axsched/ax/pkg/protocol"
)

// Defaults of the keys that the controller package does not default.
const (
	// DefaultListen is where the API listens: loopback, so that it is safe without tokens.
	DefaultListen = "127.0.0.1:8080"
	// DefaultDataDir is the embedded NATS store directory, relative to the working directory.
	DefaultDataDir = "ax-data"
	// DefaultAPIURL is where client commands find the API.
	DefaultAPIURL = "http://127.0.0.1:8080"
	// DefaultNATSURL is where exec watch finds NATS.
	DefaultNATSURL = "nats://127.0.0.1:4222"
	// envTokenName is the name of the admin token given by api.token / AX_API_TOKEN.
	envTokenName = "admin"
)

// Config is the effective configuration of ax-controller (file, env, flags).
// Its YAML form is what --print-config shows (secrets masked) and what
// configs/ax-controller.yaml documents.
type Config struct {
	Node              string        `yaml:"node"`
	DataDir           string        `yaml:"data_dir"`
	Shards            int           `yaml:"shards"`
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval"`
	AgentOfflineAfter time.Duration `yaml:"agent_offline_after"`
	// LeaseTTL is the TTL of shard leases (replicas) and group-job leases
	// (agents); LeaseRenewInterval how often a replica renews its shard
	// leases (default lease_ttl/3); AckWait how long a report may stay
	// unacknowledged before it is redelivered.
	LeaseTTL           time.Duration `yaml:"lease_ttl"`
	LeaseRenewInterval time.Duration `yaml:"lease_renew_interval"`
	AckWait            time.Duration `yaml:"ack_wait"`
	Reports            ReportsConfig `yaml:"reports"`
	History            HistoryConfig `yaml:"history"`
	Forward            ForwardConfig `yaml:"forward"`
	Log                LogConfig     `yaml:"log"`
	NATS               NATSConfig    `yaml:"nats"`
	API                APIConfig     `yaml:"api"`
}

// ReportsConfig mirrors controller.ReportsConfig: the bounds of AX_RPT and
// the streams' de-duplication window.
type ReportsConfig struct {
	// MaxBytes is the byte bound (past it agents keep reports in their outbox).
	MaxBytes int64 `yaml:"max_bytes"`
	// MaxAge is the age bound (an older report is removed by the stream).
	MaxAge time.Duration `yaml:"max_age"`
	// MaxPerSubject bounds the reports held of one agent and shard (0:
	// derived from max_bytes).
	MaxPerSubject int64 `yaml:"max_per_subject"`
	// DedupWindow is the Msg-Id de-duplication window of the streams, and
	// how long a terminal execution stays in live state.
	DedupWindow time.Duration `yaml:"dedup_window"`
}

// HistoryConfig mirrors controller.HistoryConfig: how long ended
// executions and retired one-shot jobs stay listable.
type HistoryConfig struct {
	// Retention is how long after its last change an ended execution (or a
	// retired job) is kept in history.
	Retention time.Duration `yaml:"retention"`
}

// ForwardConfig mirrors controller.ForwardConfig: how a replica hands a
// job change to the replica that works the job's shard.
type ForwardConfig struct {
	// Timeout is how long an API call waits for the owner's answer before
	// this replica sends the agents' commands itself.
	Timeout time.Duration `yaml:"timeout"`
	// Hold is how long an owner that did not answer in time is not asked.
	Hold time.Duration `yaml:"hold"`
}

// LogConfig configures the process log.
type LogConfig struct {
	// Level is debug, info, warn or error.
	Level string `yaml:"level"`
	// Format is text or json.
	Format string `yaml:"format"`
}

// NATSConfig mirrors controller.NATSConfig.
type NATSConfig struct {
	URL       string `yaml:"url"`
	Host      string `yaml:"host"`
	Port      int    `yaml:"port"`
	CredsFile string `yaml:"creds_file"`
	Replicas  int    `yaml:"replicas"`
	// Auth is none or nkeys (embedded server only).
	Auth string `yaml:"auth"`
	// TLS mirrors controller.TLSConfig.
	TLS NATSTLSConfig `yaml:"tls"`
}

// NATSTLSConfig is nats.tls (file paths, shown by --print-config).
type NATSTLSConfig struct {
	CertFile      string `yaml:"cert_file"`
	KeyFile       string `yaml:"key_file"`
	CAFile        string `yaml:"ca_file"`
	VerifyClients bool   `yaml:"verify_clients"`
}

// APITLSConfig is api.tls: with both set, the API is served over HTTPS.
type APITLSConfig struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// APIConfig configures the HTTP API.
type APIConfig struct {
	// Listen is host:port; without tokens it must be a loopback address.
	Listen string `yaml:"listen"`
	// Token is a single admin token (also AX_API_TOKEN), added to Tokens as "admin".
	Token string `yaml:"token,omitempty"`
	// Tokens are the bearer tokens with their roles.
	Tokens []api.Token `yaml:"tokens"`
	// TLS serves the API over HTTPS.
	TLS APITLSConfig `yaml:"tls"`
}

// keyKinds lists every configuration key with its kind.
func keyKinds() map[string]string {
	return map[string]string{
		"node": "string", "data_dir": "string", "shards": "int",
		"heartbeat_interval": "duration", "agent_offline_after": "duration",
		"lease_ttl": "duration", "lease_renew_interval": "duration", "ack_wait": "duration",
		"reports.max_bytes": "int", "reports.max_per_subject": "int", "reports.max_age": "duration", "reports.dedup_window": "duration", "history.retention": "duration",
		"forward.timeout": "duration", "forward.hold": "duration",
		"log.level": "string", "log.format": "string",
		"nats.url": "string", "nats.host": "string", "nats.port": "int", "nats.creds_file": "string", "nats.replicas": "int", "nats.auth": "string",
		"nats.tls.cert_file": "string", "nats.tls.key_file": "string", "nats.tls.ca_file": "string", "nats.tls.verify_clients": "bool",
		"api.listen": "string", "api.token": "string", "api.tokens": "tokens",
		"api.tls.cert_file": "string", "api.tls.key_file": "string",
	}
}

// newViper makes a viper for one command run: defaults, the --config file
// (when path is set), AX_* env and the flags named in flagKeys (flag name → key).
func newViper(path string, flags *pflag.FlagSet, flagKeys map[string]string) (*viper.Viper, error) {
	v := viper.New()
	d := controller.DefaultConfig()
	v.SetDefault("node", d.Node)
	v.SetDefault("data_dir", DefaultDataDir)
	v.SetDefault("shards", d.Shards)
	v.SetDefault("heartbeat_interval", d.HeartbeatInterval)
	v.SetDefault("agent_offline_after", d.AgentOfflineAfter)
	v.SetDefault("lease_ttl", d.LeaseTTL)
	// lease_renew_interval has no fixed default: unset, it is lease_ttl/3
	// (see loadConfig), as controller.DefaultConfig has it for the default TTL.
	v.SetDefault("ack_wait", d.AckWait)
	v.SetDefault("reports.max_bytes", d.Reports.MaxBytes)
	v.SetDefault("reports.max_per_subject", d.Reports.MaxPerSubject)
	v.SetDefault("reports.max_age", d.Reports.MaxAge)
	v.SetDefault("reports.dedup_window", d.Reports.DedupWindow)
	v.SetDefault("history.retention", d.History.Retention)
	v.SetDefault("forward.timeout", d.Forward.Timeout)
	v.SetDefault("forward.hold", d.Forward.Hold)
	v.SetDefault("log.level", "info")
	v.SetDefault("log.format", "json")
	v.SetDefault("nats.url", "")
	v.SetDefault("nats.host", d.NATS.Host)
	v.SetDefault("nats.port", d.NATS.Port)
	v.SetDefault("nats.creds_file", "")
	v.SetDefault("nats.replicas", d.NATS.Replicas)
	v.SetDefault("nats.auth", auth.ModeNone)
	v.SetDefault("nats.tls.cert_file", "")
	v.SetDefault("nats.tls.key_file", "")
	v.SetDefault("nats.tls.ca_file", "")
	v.SetDefault("nats.tls.verify_clients", false)
	v.SetDefault("api.listen", DefaultListen)
	v.SetDefault("api.token", "")
	v.SetDefault("api.tokens", []any{})
	v.SetDefault("api.tls.cert_file", "")
	v.SetDefault("api.tls.key_file", "")

	v.SetEnvPrefix("AX")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	for k, kind := range keyKinds() {
		if kind != "tokens" {
			if err := v.BindEnv(k); err != nil {
				return nil, fmt.Errorf("bind env %s: %w", k, err)
			}
		}
	}
	if path != "" {
		v.SetConfigFile(path)
		if ext := strings.ToLower(path); !strings.HasSuffix(ext, ".yaml") && !strings.HasSuffix(ext, ".yml") {
			v.SetConfigType("yaml")
		}
		if err := v.ReadInConfig(); err != nil {
			var pe viper.ConfigParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
			}
			return nil, fmt.Errorf("%w: --config: %v", ErrConfig, err)
		}
	}
	for name, key := range flagKeys {
		if f := flags.Lookup(name); f != nil {
			if err := v.BindPFlag(key, f); err != nil {
				return nil, fmt.Errorf("bind flag --%s: %w", name, err)
			}
		}
	}
	return v, nil
}

// unknownKeys returns the keys of v no one reads, sorted.
func unknownKeys(v *viper.Viper) []string {
	var bad []string
	known := keyKinds()
	for _, k := range v.AllKeys() {
		if _, ok := known[k]; !ok {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	return bad
}

// loadConfig reads and validates the full configuration.
func loadConfig(v *viper.Viper) (Config, error) {
	if bad := unknownKeys(v); len(bad) > 0 {
		return Config{}, configErr(bad[0], "unknown key (known keys: %s)", strings.Join(knownKeys(), ", "))
	}
	var c Config
	r := newValues(v)
	str, dur, boolean := r.str, r.duration, r.boolean
	c.Node = str("node")
	c.DataDir = str("data_dir")
	c.Shards = r.integer("shards", fmt.Sprintf("between 1 and %d", protocol.MaxShards), false)
	c.HeartbeatInterval = dur("heartbeat_interval")
	c.AgentOfflineAfter = dur("agent_offline_after")
	c.LeaseTTL = dur("lease_ttl")
	if v.IsSet("lease_renew_interval") {
		c.LeaseRenewInterval = dur("lease_renew_interval")
	} else {
		c.LeaseRenewInterval = c.LeaseTTL / 3
	}
	c.AckWait = dur("ack_wait")
	c.Reports.MaxBytes = r.integerIn("reports.max_bytes", "a byte count", false, 1, math.MaxInt64)
	c.Reports.MaxPerSubject = r.integerIn("reports.max_per_subject", "0 or a report count", true, 0, math.MaxInt64)
	c.Reports.MaxAge = dur("reports.max_age")
	c.Reports.DedupWindow = dur("reports.dedup_window")
	c.History.Retention = dur("history.retention")
	c.Forward.Timeout = dur("forward.timeout")
	c.Forward.Hold = dur("forward.hold")
	c.Log.Level = strings.ToLower(str("log.level"))
	c.Log.Format = strings.ToLower(str("log.format"))
	c.NATS.URL = str("nats.url")
	c.NATS.Host = str("nats.host")
	c.NATS.Port = r.integer("nats.port", "a port between 1 and 65535, or -1 for a random one", false)
	c.NATS.CredsFile = str("nats.creds_file")
	c.NATS.Replicas = r.integer("nats.replicas", "1, 3 or 5", false)
	c.NATS.Auth = strings.ToLower(str("nats.auth"))
	c.NATS.TLS.CertFile = str("nats.tls.cert_file")
	c.NATS.TLS.KeyFile = str("nats.tls.key_file")
	c.NATS.TLS.CAFile = str("nats.tls.ca_file")
	c.NATS.TLS.VerifyClients = boolean("nats.tls.verify_clients")
	c.API.Listen = str("api.listen")
	c.API.Token = str("api.token")
	c.API.TLS.CertFile = str("api.tls.cert_file")
	c.API.TLS.KeyFile = str("api.tls.key_file")
	if r.err != nil {
		return Config{}, r.err
	}
	tokens, err := parseTokens(v.Get("api.tokens"))
	if err != nil {
		return Config{}, err
	}
	c.API.Tokens = tokens
	if err := c.validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

func knownKeys() []string {
	known := keyKinds()
	ks := make([]string, 0, len(known))
	for k := range known {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// parseTokens reads api.tokens: a list of {name, token, role}.
func parseTokens(raw any) ([]api.Token, error) {
	if raw == nil {
		return nil, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, configErr("api.tokens", "must be a list of {name, token, role}")
	}
	tokens := make([]api.Token, 0, len(list))
	for i, item := range list {
		f := fmt.Sprintf("api.tokens[%d]", i)
		m, err := cast.ToStringMapE(item)
		if err != nil {
			return nil, configErr(f, "must be a mapping {name, token, role}")
		}
		var t api.Token
		for k, val := range m {
			s, err := cast.ToStringE(val)
			if err != nil {
				return nil, configErr(f+"."+k, "must be a string")
			}
			switch strings.ToLower(k) {
			case "name":
				t.Name = s
			case "token":
				t.Token = s
			case "role":
				t.Role = api.Role(strings.ToLower(s))
			default:
				return nil, configErr(f+"."+k, "unknown key (known: name, token, role)")
			}
		}
		tokens = append(tokens, t)
	}
	return tokens, nil
}

// allTokens returns api.tokens plus the single admin token of api.token.
func (c Config) allTokens() []api.Token {
	ts := slices.Clone(c.API.Tokens)
	if c.API.Token != "" {
		ts = append(ts, api.Token{Name: envTokenName, Token: c.API.Token, Role: api.RoleAdmin})
	}
	return ts
}

// validate checks the keys this package owns, then the controller's.
func (c Config) validate() error {
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return configErr("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		return configErr("log.format", "must be text or json, got %q", c.Log.Format)
	}
	if _, _, err := net.SplitHostPort(c.API.Listen); err != nil {
		return configErr("api.listen", "%q is not host:port (e.g. 127.0.0.1:8080)", c.API.Listen)
	}
	if (c.API.TLS.CertFile == "") != (c.API.TLS.KeyFile == "") {
		return configErr("api.tls.cert_file", "api.tls.cert_file and api.tls.key_file go together (set both to serve HTTPS)")
	}
	if err := api.ValidateTokens(c.API.Tokens); err != nil {
		return fmt.Errorf("%w: api.%s", ErrConfig, strings.TrimPrefix(err.Error(), api.ErrConfig.Error()+": "))
	}
	if c.API.Token != "" {
		if err := api.ValidateTokens(c.allTokens()); err != nil {
			return configErr("api.token", "(AX_API_TOKEN) %v", strings.TrimPrefix(err.Error(), api.ErrConfig.Error()+": "))
		}
	}
	if err := c.controllerConfig().Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

// checkAuth refuses to serve a non-loopback API without tokens.
func (c Config) checkAuth() error {
	if len(c.allTokens()) > 0 || loopback(c.API.Listen) {
		return nil
	}
	return configErr("api.tokens", "none configured, but api.listen %q is not a loopback address: "+
		"set api.tokens (list of {name, token, role}) or AX_API_TOKEN to require bearer tokens, "+
		"or listen on 127.0.0.1", c.API.Listen)
}

// loopback reports whether host:port binds only a loopback interface.
func loopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// controllerConfig converts to controller.Config (without Logger/Registry/Clock).
func (c Config) controllerConfig() controller.Config {
	cc := controller.DefaultConfig()
	cc.Node = c.Node
	cc.DataDir = c.DataDir
	cc.Shards = c.Shards
	cc.HeartbeatInterval = c.HeartbeatInterval
	cc.AgentOfflineAfter = c.AgentOfflineAfter
	cc.LeaseTTL = c.LeaseTTL
	cc.LeaseRenewInterval = c.LeaseRenewInterval
	cc.AckWait = c.AckWait
	cc.Reports = controller.ReportsConfig{MaxBytes: c.Reports.MaxBytes, MaxPerSubject: c.Reports.MaxPerSubject, MaxAge: c.Reports.MaxAge, DedupWindow: c.Reports.DedupWindow}
	cc.History = controller.HistoryConfig{Retention: c.History.Retention}
	cc.Forward = controller.ForwardConfig{Timeout: c.Forward.Timeout, Hold: c.Forward.Hold}
	cc.NATS = controller.NATSConfig{URL: c.NATS.URL, Host: c.NATS.Host, Port: c.NATS.Port, CredsFile: c.NATS.CredsFile, Replicas: c.NATS.Replicas, Auth: c.NATS.Auth}
	cc.NATS.TLS = controller.TLSConfig{CertFile: c.NATS.TLS.CertFile, KeyFile: c.NATS.TLS.KeyFile, CAFile: c.NATS.TLS.CAFile, VerifyClients: c.NATS.TLS.VerifyClients}
	return cc
}

// masked returns a copy with every secret replaced by "****".
func (c Config) masked() Config {
	m := c
	m.API.Token = api.Mask(c.API.Token)
	m.API.Tokens = make([]api.Token, len(c.API.Tokens))
	for i, t := range c.API.Tokens {
		t.Token = api.Mask(t.Token)
		m.API.Tokens[i] = t
	}
	return m
}
