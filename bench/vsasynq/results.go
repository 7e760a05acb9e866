package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// result is one run's figures by name; names starting with "_" are not
// printed in the table.
type result map[string]float64

func (r result) with(extra string) result {
	delete(r, "_extra")
	r["_note:"+extra] = 0
	return r
}

func (r result) String() string {
	var keys []string
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if n, ok := strings.CutPrefix(k, "_note:"); ok {
			fmt.Fprintf(&b, " %s", n)
			continue
		}
		fmt.Fprintf(&b, " %s=%.3g", k, r[k])
	}
	return strings.TrimSpace(b.String())
}

// results collects runs by workload and system.
type results struct {
	runs map[string]map[string][]result
	seq  []string
}

func (rs *results) add(workload, sys string, r result) {
	if rs.runs == nil {
		rs.runs = map[string]map[string][]result{}
	}
	if rs.runs[workload] == nil {
		rs.runs[workload] = map[string][]result{}
		rs.seq = append(rs.seq, workload)
	}
	rs.runs[workload][sys] = append(rs.runs[workload][sys], r)
}

// print writes a Markdown table: per workload and figure, the median over
// repetitions of each system (with the range) and ax / asynq.
func (rs *results) print(w io.Writer) {
	fmt.Fprintln(w, "| workload | figure | ax median (range) | asynq median (range) | ax / asynq |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, wl := range rs.seq {
		ax, aq := rs.runs[wl]["ax"], rs.runs[wl]["asynq"]
		var figs []string
		for k := range firstOr(ax, aq) {
			if !strings.HasPrefix(k, "_") {
				figs = append(figs, k)
			}
		}
		sort.Strings(figs)
		for _, f := range figs {
			am, alo, ahi := stats(ax, f)
			qm, qlo, qhi := stats(aq, f)
			ratio := "—"
			if qm != 0 {
				ratio = fmt.Sprintf("%.2f", am/qm)
			}
			fmt.Fprintf(w, "| %s | %s | %.4g (%.4g–%.4g) | %.4g (%.4g–%.4g) | %s |\n", wl, f, am, alo, ahi, qm, qlo, qhi, ratio)
		}
	}
}

func firstOr(a, b []result) result {
	if len(a) > 0 {
		return a[0]
	}
	if len(b) > 0 {
		return b[0]
	}
	return nil
}

// stats returns the median, minimum and maximum of figure f over runs.
func stats(runs []result, f string) (med, lo, hi float64) {
	var v []float64
	for _, r := range runs {
		v = append(v, r[f])
	}
	if len(v) == 0 {
		return 0, 0, 0
	}
	sort.Float64s(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return m, v[0], v[len(v)-1]
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	sort.Slice(d, func(i, k int) bool { return d[i] < d[k] })
	return d[min(int(p*float64(len(d))), len(d)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
