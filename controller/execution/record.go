package execution

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/axsched/ax/internal/storedjson"
	"github.com/axsched/ax/pkg/protocol"
)

// Record is an execution as stored in KV ax_execs: the public Execution
// plus the report steps already applied to its current attempt, which make
// every report idempotent by (exec_id, attempt, kind). Its JSON form is the
// one stored since the first release; fields are only ever added.
type Record struct {
	protocol.Execution
	// Applied lists the report steps applied to attempt Execution.Attempt,
	// in order; Path[i] is the state step Applied[i] moved the execution
	// to, and From the state before the attempt's first step ("" for none).
	// They let a duplicate report re-publish the events it caused.
	Applied []protocol.ReportKind `json:"applied,omitempty"`
	Path    []protocol.State      `json:"path,omitempty"`
	From    protocol.State        `json:"from,omitempty"`
	// Ends has bit i set when step Applied[i] was the last of the report
	// that applied it: the steps of one report make one event
	// (protocol.Event.Via), and a duplicate re-publishes that same event.
	// Zero in records of versions that made one event per step.
	Ends uint8 `json:"ends,omitempty"`
	// Sent is the attempt whose run command the controller last sent for a
	// retry (to Execution.Agent, under Execution.Epoch); 0 when none was
	// sent since the record was written by a version without it. A new
	// attempt is accepted only from that agent, for that attempt.
	Sent int `json:"sent,omitempty"`
	// Tracked is set on every write by a controller that keeps write
	// marks (controller/writemark): a reload may skip checking the
	// effects of a tracked record older than every replica's mark. A
	// record without it (written by an earlier version) is always checked.
	Tracked bool `json:"tracked,omitempty"`
}

// endsBits is how many steps Record.Ends can mark (its bits); an attempt
// applies a few (triggered, running, a final or fenced step).
const endsBits = 8

// Clone returns a deep copy, so that a change never touches a shared value.
func (r *Record) Clone() *Record {
	if r == nil {
		return nil
	}
	n := *r
	n.Applied = slices.Clone(r.Applied)
	n.Path = slices.Clone(r.Path)
	if r.Result != nil {
		res := *r.Result
		n.Result = &res
	}
	if r.Shard != nil {
		s := *r.Shard
		n.Shard = &s
	}
	return &n
}

// HasApplied reports whether report step k was applied to the current attempt.
func (r *Record) HasApplied(k protocol.ReportKind) bool { return slices.Contains(r.Applied, k) }

// Decode parses a stored record.
func Decode(b []byte) (*Record, error) {
	var r Record
	if err := storedjson.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode execution record: %w", err)
	}
	return &r, nil
}

// AppendJSON appends json.Marshal(r) to b, written by hand
// (protocol.Execution.AppendJSONFields for the embedded execution): the
// record is encoded at every write of ax_execs. TestRecordAppendJSON and
// FuzzRecordAppendJSON hold it to json.Marshal.
func (r *Record) AppendJSON(b []byte) ([]byte, error) {
	n := len(b)
	b = append(b, '{')
	b, ok := r.Execution.AppendJSONFields(b)
	if !ok {
		data, err := json.Marshal(r) // a time json.Marshal refuses: its error
		if err != nil {
			return b[:n], err
		}
		return append(b[:n], data...), nil
	}
	if len(r.Applied) > 0 {
		b = append(b, `,"applied":`...)
		b = protocol.AppendJSONStrings(b, r.Applied)
	}
	if len(r.Path) > 0 {
		b = append(b, `,"path":`...)
		b = protocol.AppendJSONStrings(b, r.Path)
	}
	if r.From != "" {
		b = append(b, `,"from":`...)
		b = protocol.AppendJSONString(b, string(r.From))
	}
	if r.Ends != 0 {
		b = append(b, `,"ends":`...)
		b = strconv.AppendUint(b, uint64(r.Ends), 10)
	}
	if r.Sent != 0 {
		b = append(b, `,"sent":`...)
		b = strconv.AppendInt(b, int64(r.Sent), 10)
	}
	if r.Tracked {
		b = append(b, `,"tracked":true`...)
	}
	return append(b, '}'), nil
}
