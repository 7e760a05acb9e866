package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// AppendJSON appends json.Marshal(j) to b, like the encoders of
// appendjson.go (the same bytes, held to json.Marshal by
// FuzzJobAppendJSONMatchesMarshal) in about a third of its time
// (BenchmarkEncodeJob): every create stores its job's JSON, and a
// create's reply is that JSON too. The payload is compacted as
// json.Marshal compacts a json.RawMessage; one json.Marshal would escape
// (an HTML character or U+2028/U+2029 in it), or one that is not JSON, is
// handed to json.Marshal, and so is a creation time it refuses.
func (j Job) AppendJSON(b []byte) ([]byte, error) {
	n, bad := len(b), false
	b = append(b, '{')
	if j.ID != "" {
		b = appendStringField(b, `"id":`, j.ID, false)
		b = append(b, ',')
	}
	b = appendStringField(b, `"name":`, j.Name, false)
	b = appendStringField(b, `,"handler":`, j.Handler, false)
	if len(j.Payload) > 0 {
		b = append(b, `,"payload":`...)
		m := len(b)
		var err error
		if b, err = appendCompactJSON(b, j.Payload); err != nil || needsHTMLEscape(b[m:]) {
			return marshalInto(b[:n], j)
		}
	}
	s := j.Schedule
	b = append(b, `,"schedule":{`...)
	m := len(b)
	if s.Asap {
		b = append(b, `,"asap":true`...)
	}
	b = appendStringField(b, `,"at":`, s.At, true)
	b = appendStringField(b, `,"delay":`, s.Delay, true)
	b = appendStringField(b, `,"every":`, s.Every, true)
	b = appendStringField(b, `,"cron":`, s.Cron, true)
	b = appendStringField(b, `,"timezone":`, s.Timezone, true)
	b = closeObject(b, m)
	b = append(b, `,"target":{`...)
	m = len(b)
	b = appendStringField(b, `,"agent":`, j.Target.Agent, true)
	b = appendStringField(b, `,"group":`, j.Target.Group, true)
	b = appendStringField(b, `,"mode":`, j.Target.Mode, true)
	b = closeObject(b, m)
	b = appendIntField(b, `,"priority":`, int64(j.Priority))
	b = appendDurationField(b, `,"timeout":`, j.Timeout)
	r := j.Retry
	b = append(b, `,"retry":{`...)
	m = len(b)
	b = appendIntField(b, `,"max_attempts":`, int64(r.MaxAttempts))
	b = appendDurationField(b, `,"base":`, r.Base)
	b = appendDurationField(b, `,"max":`, r.Max)
	b = appendDurationField(b, `,"jitter":`, r.Jitter)
	if r.OnTimeout {
		b = append(b, `,"on_timeout":true`...)
	}
	b = closeObject(b, m)
	b = append(b, `,"misfire":{`...)
	m = len(b)
	b = appendStringField(b, `,"policy":`, j.Misfire.Policy, true)
	b = appendDurationField(b, `,"grace":`, j.Misfire.Grace)
	b = appendIntField(b, `,"cap":`, int64(j.Misfire.Cap))
	b = closeObject(b, m)
	b = appendStringField(b, `,"overlap":`, j.Overlap, true)
	b = appendIntField(b, `,"concurrency":`, int64(j.Concurrency))
	b = appendStringField(b, `,"idempotency_key":`, j.IdempotencyKey, true)
	b = appendStringField(b, `,"precision":`, j.Precision, true)
	if j.Paused {
		b = append(b, `,"paused":true`...)
	}
	if j.Generation != 0 {
		b = append(b, `,"generation":`...)
		b = strconv.AppendUint(b, j.Generation, 10)
	}
	b = appendTimeField(b, `,"created_at":`, j.CreatedAt, true, &bad)
	if bad {
		return marshalInto(b[:n], j)
	}
	return append(b, '}'), nil
}

// appendIntField appends an omitempty integer member.
func appendIntField(b []byte, key string, v int64) []byte {
	if v == 0 {
		return b
	}
	b = append(b, key...)
	return strconv.AppendInt(b, v, 10)
}

// closeObject ends an object whose members were appended from m on, each
// with a leading comma: the first comma goes.
func closeObject(b []byte, m int) []byte {
	if len(b) > m {
		b = append(b[:m], b[m+1:]...)
	}
	return append(b, '}')
}

// appendCompactJSON appends src without insignificant space, or returns
// an error when src is not one JSON value.
func appendCompactJSON(b, src []byte) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, src); err != nil {
		return b, err
	}
	return buf.Bytes(), nil
}

// needsHTMLEscape reports whether json.Marshal would escape a byte of the
// compact JSON value v ('<', '>', '&', U+2028, U+2029; outside strings
// none of them can appear).
func needsHTMLEscape(v []byte) bool {
	return bytes.ContainsAny(v, "<>&") || bytes.Contains(v, []byte("\u2028")) || bytes.Contains(v, []byte("\u2029"))
}
