package protocol

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/axsched/ax/pkg/retry"
)

// The hand-written encoders of the messages every execution makes several
// of: its record (Execution, stored three or four times per execution),
// events and reports. Each writes exactly the bytes json.Marshal writes
// for the same value — the same field order, omitempty and omitzero, the
// same string escapes (HTML characters, U+2028 and U+2029, invalid UTF-8
// as U+FFFD) and time format — in a quarter to two fifths of its time
// (BenchmarkEncodeJSON): encoding/json reads every field through
// reflection. FuzzAppendJSONMatchesMarshal holds
// them to json.Marshal. A value json.Marshal refuses (a time outside years
// 0–9999 or with an offset RFC 3339 cannot write) is handed to json.Marshal,
// whose error is returned.

// jsonAppender is a value with a hand-written JSON encoder (Encode uses it).
type jsonAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// AppendJSON appends json.Marshal(e) to b.
func (e *Execution) AppendJSON(b []byte) ([]byte, error) {
	n := len(b)
	b = append(b, '{')
	b, ok := e.AppendJSONFields(b)
	if !ok {
		return marshalInto(b[:n], e)
	}
	return append(b, '}'), nil
}

// AppendJSONFields appends the members of e's JSON object, without the
// braces, for a type that embeds Execution (the controller's record); ok
// is false when json.Marshal has to encode e (a time it refuses).
func (e *Execution) AppendJSONFields(b []byte) (_ []byte, ok bool) {
	var bad bool
	b = appendStringField(b, `"exec_id":`, e.ExecID, false)
	b = appendStringField(b, `,"job_id":`, e.JobID, false)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(e.Attempt), 10)
	b = appendStringField(b, `,"state":`, string(e.State), false)
	b = appendStringField(b, `,"agent":`, e.Agent, true)
	b = appendTimeField(b, `,"scheduled_at":`, e.ScheduledAt, false, &bad)
	b = appendTimeField(b, `,"created_at":`, e.CreatedAt, false, &bad)
	b = appendTimeField(b, `,"updated_at":`, e.UpdatedAt, false, &bad)
	b = appendTimeField(b, `,"triggered_at":`, e.TriggeredAt, true, &bad)
	b = appendTimeField(b, `,"started_at":`, e.StartedAt, true, &bad)
	b = appendTimeField(b, `,"finished_at":`, e.FinishedAt, true, &bad)
	b = appendTimeField(b, `,"next_attempt_at":`, e.NextAttemptAt, true, &bad)
	b = appendOutcome(b, e.Outcome, e.Result)
	b = appendStringField(b, `,"reason":`, e.Reason, true)
	if e.Suspect {
		b = append(b, `,"suspect":true`...)
	}
	if e.Epoch != 0 {
		b = append(b, `,"epoch":`...)
		b = strconv.AppendUint(b, e.Epoch, 10)
	}
	b = appendShard(b, e.Shard)
	b = appendDurationField(b, `,"lag":`, e.Lag)
	b = appendDurationField(b, `,"duration":`, e.Duration)
	if e.SkippedCount != 0 {
		b = append(b, `,"skipped_count":`...)
		b = strconv.AppendInt(b, int64(e.SkippedCount), 10)
	}
	b = appendTimeField(b, `,"first_scheduled_at":`, e.FirstScheduledAt, true, &bad)
	return b, !bad
}

// AppendJSON appends json.Marshal(ev) to b.
func (ev Event) AppendJSON(b []byte) ([]byte, error) {
	n, bad := len(b), false
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(ev.V), 10)
	b = appendStringField(b, `,"job_id":`, ev.JobID, false)
	b = appendStringField(b, `,"exec_id":`, ev.ExecID, false)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(ev.Attempt), 10)
	b = appendStringField(b, `,"from":`, string(ev.From), true)
	if len(ev.Via) > 0 {
		b = append(b, `,"via":`...)
		b = AppendJSONStrings(b, ev.Via)
	}
	b = appendStringField(b, `,"to":`, string(ev.To), false)
	b = appendStringField(b, `,"reason":`, ev.Reason, true)
	b = appendTimeField(b, `,"at":`, ev.At, false, &bad)
	b = appendStringField(b, `,"agent":`, ev.Agent, true)
	b = appendOutcome(b, ev.Outcome, ev.Result)
	b = appendTimeField(b, `,"next_attempt_at":`, ev.NextAttemptAt, true, &bad)
	if ev.Execution != nil {
		b = append(b, `,"execution":{`...)
		var ok bool
		b, ok = ev.Execution.AppendJSONFields(b)
		bad = bad || !ok
		b = append(b, '}')
	}
	if bad {
		return marshalInto(b[:n], ev)
	}
	return append(b, '}'), nil
}

// AppendJSON appends json.Marshal(r) to b.
func (r Report) AppendJSON(b []byte) ([]byte, error) {
	n, bad := len(b), false
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(r.V), 10)
	b = appendStringField(b, `,"agent":`, r.Agent, false)
	b = appendStringField(b, `,"job_id":`, r.JobID, false)
	b = appendStringField(b, `,"exec_id":`, r.ExecID, false)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	b = appendStringField(b, `,"kind":`, string(r.Kind), false)
	b = appendTimeField(b, `,"scheduled_at":`, r.ScheduledAt, false, &bad)
	b = appendTimeField(b, `,"at":`, r.At, false, &bad)
	if r.Epoch != 0 {
		b = append(b, `,"epoch":`...)
		b = strconv.AppendUint(b, r.Epoch, 10)
	}
	b = appendOutcome(b, r.Outcome, r.Result)
	b = appendDurationField(b, `,"duration":`, r.Duration)
	b = appendDurationField(b, `,"retry_after":`, r.RetryAfter)
	b = appendDurationField(b, `,"lag":`, r.Lag)
	b = appendStringField(b, `,"reason":`, r.Reason, true)
	b = appendShard(b, r.Shard)
	b = appendTimeField(b, `,"triggered_at":`, r.TriggeredAt, true, &bad)
	b = appendTimeField(b, `,"started_at":`, r.StartedAt, true, &bad)
	if r.SkippedCount != 0 {
		b = append(b, `,"skipped_count":`...)
		b = strconv.AppendInt(b, int64(r.SkippedCount), 10)
	}
	b = appendTimeField(b, `,"first_scheduled_at":`, r.FirstScheduledAt, true, &bad)
	if bad {
		return marshalInto(b[:n], r)
	}
	return append(b, '}'), nil
}

// marshalInto appends json.Marshal(v) to b: the encoders' way out for a
// value they do not write themselves, so that its error is
// encoding/json's.
func marshalInto(b []byte, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return b, err
	}
	return append(b, data...), nil
}

// appendOutcome appends the omitempty members outcome and result.
func appendOutcome(b []byte, o retry.Outcome, r *retry.Result) []byte {
	b = appendStringField(b, `,"outcome":`, string(o), true)
	if r != nil {
		b = append(b, `,"result":{"code":`...)
		b = strconv.AppendInt(b, int64(r.Code), 10)
		b = appendStringField(b, `,"message":`, r.Message, true)
		b = append(b, `,"retryable":`...)
		b = strconv.AppendBool(b, r.Retryable)
		b = append(b, '}')
	}
	return b
}

// appendShard appends the omitempty member shard.
func appendShard(b []byte, s *ShardSlot) []byte {
	if s == nil {
		return b
	}
	b = append(b, `,"shard":{"index":`...)
	b = strconv.AppendInt(b, int64(s.Index), 10)
	b = append(b, `,"total":`...)
	b = strconv.AppendInt(b, int64(s.Total), 10)
	return append(b, '}')
}

// appendDurationField appends an omitempty Duration member: its
// MarshalText as a JSON string, nothing when zero.
func appendDurationField(b []byte, key string, d Duration) []byte {
	if d == 0 {
		return b
	}
	b = append(b, key...)
	return AppendJSONString(b, time.Duration(d).String())
}

// appendTimeField appends member key with t as time.Time.MarshalJSON
// writes it; with omitZero, nothing when t is zero. For a time
// MarshalJSON refuses it sets *bad (what it appended is then of no use:
// the caller hands the value to json.Marshal).
func appendTimeField(b []byte, key string, t time.Time, omitZero bool, bad *bool) []byte {
	if omitZero && t.IsZero() {
		return b
	}
	b = append(b, key...)
	b = append(b, '"')
	n := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	// time.Time.MarshalJSON refuses what RFC 3339 cannot write: a year
	// not of exactly four digits, a zone offset of 24 hours or more (an
	// offset's seconds are dropped, not refused).
	if len(b) < n+len("2006-01-02T15:04:05Z") || b[n+len("2006")] != '-' {
		*bad = true
	} else if b[len(b)-1] != 'Z' {
		c := b[len(b)-len("Z07:00")]
		hh := 10*(b[len(b)-len("07:00")]-'0') + (b[len(b)-len("7:00")] - '0')
		if ('0' <= c && c <= '9') || hh >= 24 {
			*bad = true
		}
	}
	return append(b, '"')
}

// jsonSafeLo and jsonSafeHi mark, bit c and bit c-64, the bytes
// encoding/json writes as they are in a string (its htmlSafeSet): ASCII
// from space on but for '"', '&', '<', '>' and '\\'. Bytes from 0x80 on
// are checked as UTF-8.
const (
	jsonSafeLo uint64 = 0xffffffff00000000 &^ (1<<'"' | 1<<'&' | 1<<'<' | 1<<'>')
	jsonSafeHi uint64 = 0xffffffffffffffff &^ (1 << ('\\' - 64))
)

// jsonSafe reports whether encoding/json writes c as it is in a string.
func jsonSafe(c byte) bool {
	if c < 64 {
		return jsonSafeLo>>c&1 != 0
	}
	return c < utf8.RuneSelf && jsonSafeHi>>(c-64)&1 != 0
}

// appendStringField appends key and s as a JSON string, or nothing when
// omitEmpty and s is empty (a member tagged omitempty).
func appendStringField(b []byte, key, s string, omitEmpty bool) []byte {
	if omitEmpty && s == "" {
		return b
	}
	b = append(b, key...)
	return AppendJSONString(b, s)
}

// AppendJSONStrings appends xs as encoding/json writes a slice of
// strings (non-nil: a nil slice is "null").
func AppendJSONStrings[S ~string](b []byte, xs []S) []byte {
	b = append(b, '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendJSONString(b, string(x))
	}
	return append(b, ']')
}

// AppendJSONString appends s as encoding/json writes a string (with its
// default HTML escaping): a port of encoding/json's appendString, for
// the hand-written encoders of types that embed these messages.
func AppendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	i := 0
	for i < len(s) && jsonSafe(s[i]) {
		i++ // the common case: nothing to escape
	}
	if i == len(s) {
		dst = append(dst, s...)
		return append(dst, '"')
	}
	start := 0
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe(c) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
