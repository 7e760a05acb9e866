package ops

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"

	"gopkg.in/yaml.v3"
)

// ErrFormat is returned when an operations file does not have the expected shape.
var ErrFormat = errors.New("unexpected file format")

// metricRe matches an ax metric name. PromQL label values (in quotes) and
// template text are stripped before matching, see MetricNames.
var metricRe = regexp.MustCompile(`\bax_[a-z0-9_]*[a-z0-9]\b`)

// quotedRe matches a double-quoted PromQL string (label values, regexes).
var quotedRe = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// MetricNames returns the distinct ax_* metric names used in a PromQL
// expression, sorted. Quoted strings are ignored, so a label value such as
// job="ax_demo" is not taken for a metric.
func MetricNames(expr string) []string {
	found := metricRe.FindAllString(quotedRe.ReplaceAllString(expr, `""`), -1)
	slices.Sort(found)
	return slices.Compact(found)
}

// AlertRule is one alerting rule of a Prometheus rule file.
type AlertRule struct {
	Group       string
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// LoadAlertRules reads a Prometheus rule file and returns its alerting
// rules. Unknown keys are an error (KnownFields), as are recording rules,
// which this repository does not use.
func LoadAlertRules(path string) ([]AlertRule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open rules: %w", err)
	}
	defer f.Close()
	var doc struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				AlertRule `yaml:",inline"`
				Record    string `yaml:"record"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrFormat, err)
	}
	var out []AlertRule
	for gi, g := range doc.Groups {
		if g.Name == "" {
			return nil, fmt.Errorf("%s: groups[%d].name: %w: is empty", path, gi, ErrFormat)
		}
		for ri, r := range g.Rules {
			if r.Record != "" || r.Alert == "" {
				return nil, fmt.Errorf("%s: groups[%d].rules[%d]: %w: want an alerting rule (alert:)", path, gi, ri, ErrFormat)
			}
			rule := r.AlertRule
			rule.Group = g.Name
			out = append(out, rule)
		}
	}
	return out, nil
}

// DashboardTarget is one query of a Grafana panel.
type DashboardTarget struct {
	Panel string
	RefID string
	Expr  string
}

// DashboardExprs reads a Grafana dashboard JSON file and returns the
// queries of all its panels (nested row panels included).
func DashboardExprs(path string) ([]DashboardTarget, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read dashboard: %w", err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrFormat, err)
	}
	if d.Title == "" || d.UID == "" {
		return nil, fmt.Errorf("%s: %w: title and uid are required", path, ErrFormat)
	}
	var out []DashboardTarget
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, DashboardTarget{Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out, nil
}

type dashboard struct {
	Title  string  `json:"title"`
	UID    string  `json:"uid"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Type    string `json:"type"`
	GridPos struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// HistogramSeries returns the series names Prometheus stores for a
// histogram named name: name_bucket, name_sum and name_count.
func HistogramSeries(name string) []string {
	return []string{name + "_bucket", name + "_sum", name + "_count"}
}
