package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/axsched/ax/pkg/protocol"
)

func newHTTPClient(timeout time.Duration) *http.Client { return &http.Client{Timeout: timeout} }

// printValue writes v as indented JSON or as YAML with the JSON field names.
func printValue(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	if format == "json" {
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var generic any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return writeYAML(w, jsonNumbers(generic))
}

// writeYAML writes v as YAML indented by two spaces.
func writeYAML(w io.Writer, v any) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	return enc.Close()
}

// jsonNumbers turns json.Number into int64/float64 so YAML prints plain numbers.
func jsonNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = jsonNumbers(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// table writes aligned columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

// row writes one line: each cell through cellText, "-" for an empty one.
func (t *table) row(cols ...string) {
	for i, c := range cols {
		cols[i] = dash(cellText(c))
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t"))
}

// maxCell is the most runes a table cell shows; -o json and -o yaml show
// everything.
const maxCell = 80

// cellText renders s for one table cell on one line: surrounding white
// space is trimmed, each line break (\n, \r\n or \r) is shown as "⏎",
// tabs and other control characters (terminal escapes included) become a
// space, and text longer than maxCell runes is cut to maxCell runes ending
// in "…".
func cellText(s string) string {
	s = strings.TrimSpace(s)
	out := make([]rune, 0, min(len(s), maxCell+1))
	prevCR := false
	for _, r := range s {
		switch {
		case r == '\n' && prevCR: // the \n of \r\n: one break
		case r == '\n' || r == '\r':
			out = append(out, '⏎')
		case unicode.IsControl(r):
			out = append(out, ' ')
		default:
			out = append(out, r)
		}
		prevCR = r == '\r'
		if len(out) > maxCell {
			break
		}
	}
	if len(out) > maxCell {
		out = append(out[:maxCell-1], '…')
	}
	return string(out)
}

func (t *table) flush() error { return t.tw.Flush() }

// timeText formats t for a table: UTC, seconds, "-" when zero.
func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

func scheduleText(j protocol.Job) string {
	s := j.Schedule
	switch {
	case s.Cron != "":
		if s.Timezone != "" {
			return "cron " + s.Cron + " (" + s.Timezone + ")"
		}
		return "cron " + s.Cron
	case s.Every != "":
		return "every " + s.Every
	case s.Delay != "":
		return "delay " + s.Delay
	case s.At != "":
		return "at " + s.At
	case s.Asap:
		return "asap"
	}
	return "-"
}

func targetText(t protocol.Target) string {
	if t.Agent != "" {
		return "agent " + t.Agent
	}
	mode := t.Mode
	if mode == "" {
		mode = protocol.ModeAny
	}
	return "group " + t.Group + " (" + mode + ")"
}

func labelsText(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func printJobs(w io.Writer, format string, jobs []protocol.Job) error {
	if format != "table" {
		if jobs == nil {
			jobs = []protocol.Job{}
		}
		return printValue(w, format, jobs)
	}
	t := newTable(w, "ID", "NAME", "HANDLER", "SCHEDULE", "TARGET", "PRIO", "PAUSED")
	for _, j := range jobs {
		t.row(j.ID, j.Name, j.Handler, scheduleText(j), targetText(j.Target), strconv.Itoa(j.Priority), strconv.FormatBool(j.Paused))
	}
	return t.flush()
}

func printExecutions(w io.Writer, format string, execs []protocol.Execution) error {
	if format != "table" {
		if execs == nil {
			execs = []protocol.Execution{}
		}
		return printValue(w, format, execs)
	}
	t := newTable(w, "EXEC_ID", "STATE", "ATTEMPT", "AGENT", "SCHEDULED", "UPDATED", "REASON")
	for _, e := range execs {
		state := string(e.State)
		if e.Suspect {
			state += " (suspect)"
		}
		t.row(e.ExecID, state, strconv.Itoa(e.Attempt), e.Agent, timeText(e.ScheduledAt), timeText(e.UpdatedAt), e.Reason)
	}
	return t.flush()
}

func printAgents(w io.Writer, format string, agents []protocol.AgentInfo) error {
	if format != "table" {
		if agents == nil {
			agents = []protocol.AgentInfo{}
		}
		return printValue(w, format, agents)
	}
	t := newTable(w, "AGENT", "ONLINE", "VERSION", "OS/ARCH", "LAST_SEEN", "LEASES", "LABELS")
	for _, a := range agents {
		online := strconv.FormatBool(a.Online)
		switch {
		case a.Revoked:
			online = "revoked"
		case a.NoCommandConsumer:
			online = "no-commands" // online, but no consumer of its commands on AX_CMD
		}
		osArch := ""
		if a.OS != "" || a.Arch != "" {
			osArch = a.OS + "/" + a.Arch
		}
		t.row(a.Agent, online, a.Version, osArch, timeText(a.LastSeen), leasesText(a.Leases), labelsText(a.Labels))
	}
	return t.flush()
}

// leasesText renders the group-job leases an agent holds as
// "job@epoch,job@epoch". When they do not fit in one cell it shows as many
// as fit and how many more: "job@3,job@7,+4"; -o json lists them all.
func leasesText(ls []protocol.HeldLease) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.JobID + "@" + strconv.FormatUint(l.Epoch, 10)
	}
	if all := strings.Join(parts, ","); utf8.RuneCountInString(all) <= maxCell {
		return all
	}
	shown := 0
	for n := 1; n < len(parts); n++ {
		s := strings.Join(parts[:n], ",") + ",+" + strconv.Itoa(len(parts)-n)
		if utf8.RuneCountInString(s) > maxCell {
			break
		}
		shown = n
	}
	if shown == 0 {
		return "+" + strconv.Itoa(len(parts))
	}
	return strings.Join(parts[:shown], ",") + ",+" + strconv.Itoa(len(parts)-shown)
}

// printCompactJSON writes v as one JSON line (streams: one object per event).
func printCompactJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
