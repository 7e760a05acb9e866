package cli

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"
)

// values reads the typed value of each key from viper strictly: a number
// with a fraction is not an integer, a number is not a bool, and zero is
// not "the default". Errors (*ConfigError) name the key and the value as
// it was given; the first one is kept.
type values struct {
	v   *viper.Viper
	raw map[string]string // the config file's scalars as written, by key
	err error
}

func newValues(v *viper.Viper) *values {
	r := &values{v: v, raw: map[string]string{}}
	if path := v.ConfigFileUsed(); path != "" {
		if data, err := os.ReadFile(path); err == nil {
			var doc yaml.Node
			if yaml.Unmarshal(data, &doc) == nil && len(doc.Content) > 0 {
				collectScalars(doc.Content[0], "", r.raw)
			}
		}
	}
	return r
}

// collectScalars records the text of every scalar below the mapping n.
func collectScalars(n *yaml.Node, prefix string, out map[string]string) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key := strings.ToLower(n.Content[i].Value)
		if prefix != "" {
			key = prefix + "." + key
		}
		switch v := n.Content[i+1]; v.Kind {
		case yaml.ScalarNode:
			out[key] = v.Value
		case yaml.MappingNode:
			collectScalars(v, key, out)
		}
	}
}

func (r *values) fail(k, format string, args ...any) {
	if r.err == nil {
		r.err = configErr(k, format, args...)
	}
}

// given is the value of k as written: a string (env, flag, quoted in the
// file) quoted, else the config file's text.
func (r *values) given(k string) string {
	x := r.v.Get(k)
	if s, ok := x.(string); ok {
		return strconv.Quote(s)
	}
	if s, ok := r.raw[k]; ok {
		return s
	}
	return fmt.Sprint(x)
}

func (r *values) str(k string) string {
	switch x := r.v.Get(k).(type) {
	case string:
		return strings.TrimSpace(x)
	case bool, int, int64, uint64, float64:
		return r.given(k)
	case nil:
		return ""
	default:
		r.fail(k, "must be a string, got %s", r.given(k))
		return ""
	}
}

// integer reads k as an int32-sized integer. allowed says which values
// are valid, for messages; zeroOK whether 0 is one (otherwise 0 would
// silently mean the default).
func (r *values) integer(k, allowed string, zeroOK bool) int {
	return int(r.integerIn(k, allowed, zeroOK, math.MinInt32, math.MaxInt32))
}

// integerIn reads k as an integer within [lo, hi], as integer does.
func (r *values) integerIn(k, allowed string, zeroOK bool, lo, hi int64) int64 {
	var n int64
	switch x := r.v.Get(k).(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		if x > math.MaxInt64 {
			r.fail(k, "%s is out of range (%s)", r.given(k), allowed)
			return 0
		}
		n = int64(x)
	case float64:
		if x != math.Trunc(x) {
			r.fail(k, "must be an integer (%s), got %s", allowed, r.given(k))
			return 0
		}
		if math.Abs(x) >= 1<<53 {
			r.fail(k, "%s is out of range (%s)", r.given(k), allowed)
			return 0
		}
		n = int64(x)
	case string:
		var err error
		n, err = strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			r.fail(k, "%s is out of range (%s)", r.given(k), allowed)
			return 0
		} else if err != nil {
			r.fail(k, "must be an integer (%s), got %s", allowed, r.given(k))
			return 0
		}
	default:
		r.fail(k, "must be an integer (%s), got %s", allowed, r.given(k))
		return 0
	}
	if n < lo || n > hi {
		r.fail(k, "%s is out of range (%s)", r.given(k), allowed)
		return 0
	}
	if n == 0 && !zeroOK {
		r.fail(k, "must be %s, got 0 (leave the key out for the default)", allowed)
		return 0
	}
	return n
}

func (r *values) boolean(k string) bool {
	switch x := r.v.Get(k).(type) {
	case bool:
		return x
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		if err != nil {
			r.fail(k, "must be true or false, got %s", r.given(k))
		}
		return b
	default:
		r.fail(k, "must be true or false, got %s", r.given(k))
		return false
	}
}

// duration reads k, which must be above zero.
func (r *values) duration(k string) time.Duration {
	var d time.Duration
	switch x := r.v.Get(k).(type) {
	case time.Duration:
		d = x
	case string:
		var err error
		if d, err = time.ParseDuration(strings.TrimSpace(x)); err != nil {
			r.fail(k, "%s is not a duration such as \"5s\"", r.given(k))
			return 0
		}
	default:
		r.fail(k, "must be a duration such as \"5s\", got %s", r.given(k))
		return 0
	}
	if d == 0 {
		r.fail(k, "must be > 0, got %s (leave the key out for the default)", r.given(k))
	}
	return d
}
