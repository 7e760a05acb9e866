package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/pkg/protocol"
	"github.com/axsched/ax/pkg/retry"
)

// TestCellText: a table cell is one line — breaks shown as ⏎, tabs and
// control characters as spaces, surrounding space trimmed — and at most
// maxCell runes, cut with "…".
func TestCellText(t *testing.T) {
	long := strings.Repeat("x", maxCell+20)
	exact := strings.Repeat("é", maxCell)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "exit status 1", "exit status 1"},
		{"empty", "", ""},
		{"newlines", "stderr:\nline 1\nline 2", "stderr:⏎line 1⏎line 2"},
		{"crlf is one break", "a\r\nb", "a⏎b"},
		{"lone cr", "a\rb", "a⏎b"},
		{"blank line kept visible", "a\n\nb", "a⏎⏎b"},
		{"tabs", "col1\tcol2", "col1 col2"},
		{"terminal escape", "red \x1b[31mtext", "red  [31mtext"},
		{"trailing newline trimmed", "  out: done\n\n", "out: done"},
		{"exactly maxCell runes kept", exact, exact},
		{"long cut to maxCell", long, strings.Repeat("x", maxCell-1) + "…"},
		{"multibyte cut on a rune", strings.Repeat("ü", maxCell+1), strings.Repeat("ü", maxCell-1) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cellText(tc.in)
			if got != tc.want {
				t.Errorf("cellText(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if n := utf8.RuneCountInString(got); n > maxCell {
				t.Errorf("cellText(%q) has %d runes, more than %d", tc.in, n, maxCell)
			}
			if strings.ContainsAny(got, "\n\r\t") {
				t.Errorf("cellText(%q) = %q still breaks the row", tc.in, got)
			}
		})
	}
}

// TestPrintEventOneLine: in a table every event is exactly one line,
// whatever its result message holds; -o json keeps the message as sent.
func TestPrintEventOneLine(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ev := func(reason, msg string) protocol.Event {
		e := protocol.Event{V: protocol.Version, JobID: "ax-t1-20261129120000-aaaaaa", ExecID: "x1", Attempt: 2,
			From: protocol.StateRunning, To: protocol.StateFailed, At: at, Agent: "edge-7", Reason: reason}
		if msg != "" {
			e.Result = &retry.Result{Code: 1, Message: msg}
		}
		return e
	}
	tail := "exit status 1\nstdout tail:\nok\nstderr tail:\n\tpanic: boom\n" + strings.Repeat("trace ", 40)
	for _, tc := range []struct {
		name       string
		ev         protocol.Event
		wantReason string // the REASON cell, the end of the row
	}{
		{"no message", ev("timeout", ""), "timeout"},
		{"no reason", ev("", ""), "-"},
		{"one-line message", ev("handler", "exit status 2"), "handler exit status 2"},
		{"stdout and stderr tails", ev("handler", tail),
			cellText("handler " + tail)},
		{"windows line ends", ev("", "line 1\r\nline 2\r\n"), "line 1⏎line 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printEvent(&b, "table", tc.ev); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
				t.Fatalf("table row is not one line: %q", out)
			}
			row := strings.TrimSuffix(out, "\n")
			if !strings.HasSuffix(row, "  "+tc.wantReason) {
				t.Errorf("row %q does not end with reason %q", row, tc.wantReason)
			}
			for _, f := range []string{"2026-11-29 12:00:00Z", "FAILED", "RUNNING", "edge-7", "x1"} {
				if !strings.Contains(row, f) {
					t.Errorf("row %q lacks %q", row, f)
				}
			}

			b.Reset()
			if err := printEvent(&b, "json", tc.ev); err != nil {
				t.Fatal(err)
			}
			var got protocol.Event
			if err := json.Unmarshal(b.Bytes(), &got); err != nil {
				t.Fatalf("json line %q: %v", b.String(), err)
			}
			if strings.Count(b.String(), "\n") != 1 {
				t.Errorf("json event is not one line: %q", b.String())
			}
			if (got.Result == nil) != (tc.ev.Result == nil) || got.Result != nil && got.Result.Message != tc.ev.Result.Message {
				t.Errorf("json result %+v, want %+v (unchanged)", got.Result, tc.ev.Result)
			}
		})
	}
	if r := cellText("handler " + tail); !strings.HasSuffix(r, "…") || !strings.Contains(r, "stdout tail:⏎ok⏎stderr tail:⏎ panic: boom") {
		t.Errorf("tail cell = %q", r)
	}
}

// TestTableRowsOneLine: the tables of ls commands keep one line per row
// and "-" for empty cells.
func TestTableRowsOneLine(t *testing.T) {
	var b bytes.Buffer
	err := printExecutions(&b, "table", []protocol.Execution{
		{ExecID: "x1", State: protocol.StateFailed, Attempt: 1, Agent: "edge-7", Reason: "handler: exit 1\nstderr:\tboom"},
		{ExecID: "x2", State: protocol.StatePending},
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("want header and 2 rows, got %d lines:\n%s", len(lines), b.String())
	}
	if !strings.HasSuffix(lines[1], "handler: exit 1⏎stderr: boom") {
		t.Errorf("row 1 = %q", lines[1])
	}
	if f := strings.Fields(lines[2]); len(f) != 7 || f[3] != "-" || f[6] != "-" {
		t.Errorf("row 2 = %q, want 7 cells with - for the empty agent and reason", lines[2])
	}
}
