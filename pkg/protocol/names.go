package protocol

import (
	"sort"
	"strconv"
	"strings"
)

// Name rules. Agent ids, node names and handler names end up as NATS subject
// tokens and KV keys, so they are restricted to characters safe in both.
const (
	// MaxNameLen bounds agent ids, node names and handler names.
	MaxNameLen = 64
	// MaxLabelKeyLen bounds a label key.
	MaxLabelKeyLen = 63
	// MaxLabelValueLen bounds a label value.
	MaxLabelValueLen = 63
	// MaxLabels bounds the number of labels of an agent.
	MaxLabels = 32
)

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ValidateName checks an agent id, node name or handler name: 1 to
// MaxNameLen characters of [A-Za-z0-9_-], starting with a letter or digit.
// field names the field in the error.
func ValidateName(field, s string) error {
	if s == "" {
		return invalid(field, "is required")
	}
	if len(s) > MaxNameLen {
		return invalid(field, "is %d characters, at most %d allowed", len(s), MaxNameLen)
	}
	if !isAlnum(s[0]) {
		return invalid(field, "%q must start with a letter or digit", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '_' && c != '-' {
			return invalid(field, "%q has %q at %d; allowed are letters, digits, '_' and '-'", s, c, i)
		}
	}
	return nil
}

// ValidateLabels checks an agent's labels: at most MaxLabels; keys of 1 to
// MaxLabelKeyLen characters of [A-Za-z0-9_./-] starting with a letter or digit;
// values of at most MaxLabelValueLen characters of [A-Za-z0-9_.-].
func ValidateLabels(field string, labels map[string]string) error {
	if len(labels) > MaxLabels {
		return invalid(field, "has %d labels, at most %d allowed", len(labels), MaxLabels)
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := validateLabelKey(field, k); err != nil {
			return err
		}
		if err := validateLabelValue(field+"."+k, labels[k]); err != nil {
			return err
		}
	}
	return nil
}

func validateLabelKey(field, k string) error {
	if k == "" {
		return invalid(field, "label key is empty")
	}
	if len(k) > MaxLabelKeyLen {
		return invalid(field, "label key %q is longer than %d", k, MaxLabelKeyLen)
	}
	if !isAlnum(k[0]) {
		return invalid(field, "label key %q must start with a letter or digit", k)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !isAlnum(c) && c != '_' && c != '-' && c != '.' && c != '/' {
			return invalid(field, "label key %q has %q; allowed are letters, digits, '_', '-', '.', '/'", k, c)
		}
	}
	return nil
}

func validateLabelValue(field, v string) error {
	if len(v) > MaxLabelValueLen {
		return invalid(field, "label value is longer than %d", MaxLabelValueLen)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !isAlnum(c) && c != '_' && c != '-' && c != '.' {
			return invalid(field, "label value %q has %q; allowed are letters, digits, '_', '-', '.'", v, c)
		}
	}
	return nil
}

// Selector is a parsed group selector: every key must be present on an
// agent's labels with the same value. "site=plant-3,role=valve".
type Selector map[string]string

// ParseSelector parses "k=v[,k=v...]". field names the field in errors.
func ParseSelector(field, s string) (Selector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, invalid(field, "is required (form key=value[,key=value])")
	}
	sel := Selector{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, invalid(field, "%q is not key=value", part)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if err := validateLabelKey(field, k); err != nil {
			return nil, err
		}
		if err := validateLabelValue(field, v); err != nil {
			return nil, err
		}
		if _, dup := sel[k]; dup {
			return nil, invalid(field, "key %q appears twice", k)
		}
		sel[k] = v
	}
	if len(sel) > MaxLabels {
		return nil, invalid(field, "has %d terms, at most %d allowed", len(sel), MaxLabels)
	}
	return sel, nil
}

// Matches reports whether labels satisfy every term of the selector.
func (s Selector) Matches(labels map[string]string) bool {
	for k, v := range s {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// String returns the selector in canonical form: terms sorted by key.
func (s Selector) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + s[k])
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }
