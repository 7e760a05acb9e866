package e2e

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/pkg/protocol"
)

// The report of TestFaultInjection: violations by category and class,
// and the figures of the run.

// Violation categories, in the order of the report.
const (
	vLost        = "lost"
	vDuplicate   = "duplicate"
	vStuck       = "stuck"
	vEarly       = "early"
	vMisrecorded = "misrecorded"
	vOverlap     = "overlap"
	vFencing     = "fencing"
	vHistory     = "history"
)

// violationKinds are the categories in report order.
func violationKinds() []string {
	return []string{vLost, vDuplicate, vStuck, vEarly, vMisrecorded, vOverlap, vFencing, vHistory}
}

// faultReport is the outcome of the reconciliation: per category, the
// violations grouped by class (what broke, for which kind of job).
type faultReport struct {
	violations map[string]map[string][]string // category → class → messages
	stats      []string
}

func newFaultReport() *faultReport {
	return &faultReport{violations: map[string]map[string][]string{}}
}

func (r *faultReport) add(kind, class, format string, args ...any) {
	if r.violations[kind] == nil {
		r.violations[kind] = map[string][]string{}
	}
	r.violations[kind][class] = append(r.violations[kind][class], fmt.Sprintf(format, args...))
}

func (r *faultReport) count(kind string) int {
	n := 0
	for _, v := range r.violations[kind] {
		n += len(v)
	}
	return n
}

// failed reports whether any invariant broke.
func (r *faultReport) failed() bool {
	for _, k := range violationKinds() {
		if r.count(k) > 0 {
			return true
		}
	}
	return false
}

// counts is "lost=0 duplicate=2 ...".
func (r *faultReport) counts() string {
	var s []string
	for _, k := range violationKinds() {
		s = append(s, fmt.Sprintf("%s=%d", k, r.count(k)))
	}
	return strings.Join(s, " ")
}

// format is the report: counts, each class of violation with its count
// and up to max examples, then the figures.
func (r *faultReport) format(max int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "violations: %s\n", r.counts())
	for _, k := range violationKinds() {
		classes := slices.SortedFunc(maps.Keys(r.violations[k]), func(a, b string) int {
			return cmp.Or(len(r.violations[k][b])-len(r.violations[k][a]), strings.Compare(a, b))
		})
		for _, c := range classes {
			v := r.violations[k][c]
			fmt.Fprintf(&b, "  %s ×%d: %s\n", k, len(v), c)
			for i, s := range v {
				if i == max {
					fmt.Fprintf(&b, "      … and %d more\n", len(v)-max)
					break
				}
				fmt.Fprintf(&b, "      %s\n", s)
			}
		}
	}
	for _, s := range r.stats {
		fmt.Fprintf(&b, "%s\n", s)
	}
	return b.String()
}

// jobClass names a job's kind for grouping violations: the name of a
// periodic job, "one-shot <handler> <pinned|group>" for the stream.
func jobClass(j faultJob) string {
	if j.class != "" {
		return j.class
	}
	if j.Schedule.Every != "" || j.Schedule.Cron != "" {
		return fmt.Sprintf("%s (%s)", j.Name, j.kind)
	}
	target := "pinned"
	if j.Target.Agent == "" {
		target = "group"
	}
	return fmt.Sprintf("one-shot %s %s", j.kind, target)
}

// faultStats are the figures of the run: runs, executions by state,
// attempts, jobs.
func faultStats(d faultData, orphaned func(faultRun) bool) []string {
	states := map[protocol.State]int{}
	retried := 0
	for _, e := range d.execs {
		states[e.State]++
		if e.Attempt > 1 {
			retried++
		}
	}
	var st []string
	for _, s := range slices.Sorted(maps.Keys(states)) {
		st = append(st, fmt.Sprintf("%s=%d", s, states[s]))
	}
	open, orphans, failedRuns := 0, 0, 0
	for _, run := range d.runs {
		switch {
		case orphaned(run):
			orphans++
		case run.end.IsZero():
			open++
		case run.exit != 0:
			failedRuns++
		}
	}
	kinds := map[string]int{}
	for _, j := range d.oneShots {
		kinds[j.kind]++
	}
	return []string{
		fmt.Sprintf("runs: %d (%d failed, %d cut by an agent kill, %d without an end)", len(d.runs), failedRuns, orphans, open),
		fmt.Sprintf("executions: %d (%s), %d with more than one attempt; %d events", len(d.execs), strings.Join(st, " "), retried, len(d.events)),
		fmt.Sprintf("jobs: %d periodic, %d one-shot (go %d, exec %d, http %d)", len(d.jobs)-len(d.oneShots), len(d.oneShots), kinds["go"], kinds["exec"], kinds["http"]),
	}
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format("15:04:05.000")
}
