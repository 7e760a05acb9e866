package agent

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// keyTag is the struct tag of Config that names each key: the YAML key, and,
// upper-cased with "." → "_" and prefixed by "AX_", the environment variable.
// The loader walks these tags, so a key is declared once, on its field.
const keyTag = "config"

// envPrefix prefixes the environment variable of every key.
const envPrefix = "AX_"

// LoadConfig returns DefaultConfig overlaid, in increasing precedence, with
// the YAML file (skipped if file is ""), the AX_* variables lookupEnv finds
// (AX_CLOCK_MAX_SKEW for clock.max_skew; empty values are ignored) and
// overrides (key → value, e.g. from flags: "nats.url" → "nats://h:4222").
// Durations are strings such as "5s"; lists given as one string (env,
// overrides) are comma-separated, labels as "k=v,k=v". Unknown keys and
// values of the wrong type are refused with ErrConfig naming the key. The
// result is not validated: call Config.Validate.
func LoadConfig(file string, lookupEnv func(string) (string, bool), overrides map[string]string) (Config, error) {
	cfg := DefaultConfig()
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return cfg, fmt.Errorf("read config %s: %w", file, err)
		}
		if err := decodeYAML(data, &cfg); err != nil {
			return cfg, fmt.Errorf("config %s: %w", file, err)
		}
	}
	used := make(map[string]bool, len(overrides))
	err := walkKeys(reflect.ValueOf(&cfg).Elem(), "", func(key string, v reflect.Value) error {
		env := envName(key)
		if s, ok := lookupEnv(env); ok && s != "" {
			if err := setString(v, s); err != nil {
				return cfgErr(key, "%s: %v", env, err)
			}
		}
		if s, ok := overrides[key]; ok {
			used[key] = true
			if err := setString(v, s); err != nil {
				return cfgErr(key, "%v", err)
			}
		}
		return nil
	})
	if err != nil {
		return cfg, err
	}
	for _, key := range slices.Sorted(maps.Keys(overrides)) {
		if !used[key] {
			return cfg, cfgErr(key, "unknown key")
		}
	}
	return cfg, nil
}

// MarshalYAML renders the config with its keys (durations as "5s"), in the
// form LoadConfig reads. Print Masked() to hide secrets.
func (c Config) MarshalYAML() (any, error) { return keyMap(reflect.ValueOf(c)), nil }

// ConfigError is an invalid configuration value. errors.Is(err,
// ErrConfig) is true; Key names it as in the YAML file ("clock.max_skew",
// "exec.allow[1]").
type ConfigError struct {
	// Key is the configuration key, dotted.
	Key string
	// Reason says what is wrong, with the value given.
	Reason string
}

// Error returns "invalid agent config: key: reason".
func (e *ConfigError) Error() string { return ErrConfig.Error() + ": " + e.Key + ": " + e.Reason }

// Unwrap returns ErrConfig.
func (e *ConfigError) Unwrap() error { return ErrConfig }

// envName is the environment variable of key: clock.max_skew →
// AX_CLOCK_MAX_SKEW.
func envName(key string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// decodeYAML overlays cfg with the YAML document data.
func decodeYAML(data []byte, cfg *Config) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if len(doc.Content) == 0 { // empty or only comments
		return nil
	}
	return decodeSection(doc.Content[0], reflect.ValueOf(cfg).Elem(), "")
}

// decodeSection decodes the mapping n into the struct v whose keys start
// with prefix.
func decodeSection(n *yaml.Node, v reflect.Value, prefix string) error {
	if n.Kind != yaml.MappingNode {
		return cfgErr(cmp.Or(prefix, "(top level)"), "line %d: must be a mapping of keys", n.Line)
	}
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		key := joinKey(prefix, kn.Value)
		if seen[kn.Value] {
			return cfgErr(key, "line %d: key given twice", kn.Line)
		}
		seen[kn.Value] = true
		f, ok := lookupKey(v, kn.Value)
		if !ok {
			return cfgErr(key, "line %d: unknown key", kn.Line)
		}
		if err := decodeValue(vn, f, key); err != nil {
			return err
		}
	}
	return nil
}

// decodeValue decodes n into the field v of key. A null value keeps the
// default. A list key takes a YAML sequence and a map key a mapping (one
// "a,b" string is for the environment and flags only); items and entries
// are named by their path ("exec.allow[1]", "labels.site").
func decodeValue(n *yaml.Node, v reflect.Value, key string) error {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	switch {
	case v.Kind() == reflect.Struct:
		return decodeSection(n, v, key)
	case v.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return cfgErr(key, "line %d: must be a list (\"- item\" lines or [a, b]), got %s", n.Line, describeNode(n))
		}
		l := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := decodeValue(item, l.Index(i), key+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		v.Set(l)
	case v.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			return cfgErr(key, "line %d: must be a mapping (key: value), got %s", n.Line, describeNode(n))
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			kn, vn := n.Content[i], n.Content[i+1]
			k := reflect.ValueOf(kn.Value)
			if m.MapIndex(k).IsValid() {
				return cfgErr(joinKey(key, kn.Value), "line %d: key given twice", kn.Line)
			}
			e := reflect.New(v.Type().Elem()).Elem()
			if err := decodeValue(vn, e, joinKey(key, kn.Value)); err != nil {
				return err
			}
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case n.Kind == yaml.ScalarNode:
		if err := setString(v, n.Value); err != nil {
			return cfgErr(key, "line %d: %v", n.Line, err)
		}
	default:
		return cfgErr(key, "line %d: must be a single value, got %s", n.Line, describeNode(n))
	}
	return nil
}

// describeNode names what a YAML node is, for messages: the scalar as
// written, or "a list" / "a mapping".
func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "a YAML " + n.Tag
}

// setString sets v from its string form: a duration ("5s"), an integer, a
// boolean, a string, a comma-separated list, or "k=v,k=v" for a map.
func setString(v reflect.Value, s string) error {
	switch {
	case isDuration(v.Type()):
		d, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a duration such as 5s or 500ms", s)
		}
		v.SetInt(int64(d))
	case v.Kind() == reflect.String:
		v.SetString(s)
	case v.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not true or false", s)
		}
		v.SetBool(b)
	case v.Kind() == reflect.Int:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 0, v.Type().Bits())
		if errors.Is(err, strconv.ErrRange) {
			return fmt.Errorf("%q is out of range for an integer", s)
		}
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		v.SetInt(n)
	case v.Kind() == reflect.Slice:
		parts := splitList(s)
		l := reflect.MakeSlice(v.Type(), len(parts), len(parts))
		for i, p := range parts {
			if err := setString(l.Index(i), p); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
		v.Set(l)
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String:
		m := reflect.MakeMap(v.Type())
		for _, p := range splitList(s) {
			k, val, ok := strings.Cut(p, "=")
			if !ok {
				return fmt.Errorf("%q is not key=value", p)
			}
			e := reflect.New(v.Type().Elem()).Elem()
			if err := setString(e, val); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			m.SetMapIndex(reflect.ValueOf(strings.TrimSpace(k)), e)
		}
		v.Set(m)
	default:
		return fmt.Errorf("cannot set a %s from a string", v.Type())
	}
	return nil
}

func isDuration(t reflect.Type) bool { return t == reflect.TypeFor[time.Duration]() }

// splitList splits a comma-separated list, trimming spaces; "" is empty.
func splitList(s string) []string {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// walkKeys calls fn with every leaf key below the struct v and its field.
func walkKeys(v reflect.Value, prefix string, fn func(key string, v reflect.Value) error) error {
	for i := range v.NumField() {
		name := v.Type().Field(i).Tag.Get(keyTag)
		if name == "" {
			continue
		}
		key, f := joinKey(prefix, name), v.Field(i)
		var err error
		if f.Kind() == reflect.Struct {
			err = walkKeys(f, key, fn)
		} else {
			err = fn(key, f)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// lookupKey finds the field of the (dotted) key below the struct v.
func lookupKey(v reflect.Value, key string) (reflect.Value, bool) {
	name, rest, nested := strings.Cut(key, ".")
	for i := range v.NumField() {
		if name == "" || v.Type().Field(i).Tag.Get(keyTag) != name {
			continue
		}
		f := v.Field(i)
		switch {
		case !nested:
			return f, true
		case f.Kind() == reflect.Struct:
			return lookupKey(f, rest)
		}
	}
	return reflect.Value{}, false
}

// keyMap renders the struct v as nested maps of its keys.
func keyMap(v reflect.Value) map[string]any {
	m := make(map[string]any, v.NumField())
	for i := range v.NumField() {
		name := v.Type().Field(i).Tag.Get(keyTag)
		f := v.Field(i)
		switch {
		case name == "":
		case f.Kind() == reflect.Struct:
			m[name] = keyMap(f)
		case isDuration(f.Type()):
			m[name] = time.Duration(f.Int()).String()
		default:
			m[name] = f.Interface()
		}
	}
	return m
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
