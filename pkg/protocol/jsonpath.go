package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Raw checks of JSON input that encoding/json cannot make: it turns
// invalid UTF-8 and unpaired UTF-16 surrogate escapes in strings into
// U+FFFD (so two different byte strings decode to one value), and it names
// an unknown field without its parents ("evry", not "schedule.evry").
// Both are found on the raw bytes and named by their full path.

// checkStrings returns a *FieldError naming the first string of data that
// is not valid UTF-8 or holds an unpaired surrogate escape; nil if none.
func checkStrings(data []byte) error {
	off, reason, bad := badString(data)
	if !bad {
		return nil
	}
	path, isKey := pathAt(data, off)
	if isKey {
		if path == "" {
			path = "(root)"
		}
		return invalid(path, "has a key that %s", reason)
	}
	return invalid(path, "%s", reason)
}

// badString scans the strings of data and returns the offset of the first
// byte that is not valid UTF-8 or of the first unpaired surrogate escape.
func badString(data []byte) (off int, reason string, bad bool) {
	in := false
	for i := 0; i < len(data); {
		c := data[i]
		if !in {
			in = c == '"'
			i++
			continue
		}
		switch {
		case c == '"':
			in = false
			i++
		case c == '\\':
			if i+6 <= len(data) && data[i+1] == 'u' {
				r, ok := hex4(data[i+2 : i+6])
				if ok && utf16.IsSurrogate(r) {
					if r < 0xdc00 && i+12 <= len(data) && data[i+6] == '\\' && data[i+7] == 'u' {
						if r2, ok := hex4(data[i+8 : i+12]); ok && r2 >= 0xdc00 && r2 <= 0xdfff {
							i += 12
							continue
						}
					}
					return i, fmt.Sprintf("is not valid text: unpaired UTF-16 surrogate %s", data[i:i+6]), true
				}
				i += 6
				continue
			}
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return i, fmt.Sprintf("is not valid UTF-8 (byte 0x%02x)", c), true
			}
			i += size
		}
	}
	return 0, "", false
}

func hex4(b []byte) (rune, bool) {
	n, err := strconv.ParseUint(string(b), 16, 32)
	return rune(n), err == nil
}

// pathAt returns the path of the JSON token of data that holds byte off,
// and whether that token is an object key. "" when data cannot be
// tokenized up to off (the decoder then reports the syntax error).
func pathAt(data []byte, off int) (path string, isKey bool) {
	var found walkEvent
	ok := walkJSON(data, nil, func(e walkEvent) bool {
		found = e
		return e.end > off
	})
	if !ok {
		return "", false
	}
	if found.isKey {
		return found.parent, true
	}
	return found.path, false
}

// unknownFieldPath returns the full path of the first object key of data
// that names no field of the struct it decodes into (t is the type
// decoded into); "" when there is none.
func unknownFieldPath(data []byte, t reflect.Type) string {
	var found walkEvent
	if !walkJSON(data, t, func(e walkEvent) bool {
		found = e
		return e.isKey && e.unknown
	}) {
		return ""
	}
	return found.path
}

// walkEvent is one token met by walkJSON.
type walkEvent struct {
	path    string // of the value (for a key: of the value it names)
	parent  string // path of the enclosing object or array
	isKey   bool
	unknown bool // a key naming no field of its struct
	end     int  // offset just past the token
}

type walkFrame struct {
	obj     bool
	wantKey bool
	key     string
	n       int          // array: values seen
	typ     reflect.Type // the container's type; nil: not known
	elem    reflect.Type // type of the value being read
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// walkJSON calls fn for every key and value of data, in order, until fn
// returns true; it returns whether fn did. t, if set, is the type data
// decodes into: keys are then checked against its structs' fields as
// encoding/json matches them (exact name, else case-insensitive).
func walkJSON(data []byte, t reflect.Type, fn func(walkEvent) bool) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var st []walkFrame
	pathOf := func(st []walkFrame) string {
		var b strings.Builder
		for _, f := range st {
			if f.obj {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(f.key)
			} else {
				b.WriteString("[" + strconv.Itoa(f.n-1) + "]")
			}
		}
		return b.String()
	}
	valueDone := func() {
		if n := len(st); n > 0 && st[n-1].obj {
			st[n-1].wantKey = true
		}
	}
	root := plainType(t)
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		end := int(dec.InputOffset())
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			st = st[:len(st)-1]
			valueDone()
			continue
		}
		if n := len(st); n > 0 && st[n-1].obj && st[n-1].wantKey {
			f := &st[n-1]
			f.key, _ = tok.(string)
			f.wantKey = false
			var unknown bool
			f.elem, unknown = memberType(f.typ, f.key)
			if fn(walkEvent{path: pathOf(st), parent: pathOf(st[:n-1]), isKey: true, unknown: unknown, end: end}) {
				return true
			}
			continue
		}
		elem := root
		if n := len(st); n > 0 {
			if !st[n-1].obj {
				st[n-1].n++
				st[n-1].elem = itemType(st[n-1].typ)
			}
			elem = st[n-1].elem
		}
		if fn(walkEvent{path: pathOf(st), end: end}) {
			return true
		}
		if d, ok := tok.(json.Delim); ok {
			st = append(st, walkFrame{obj: d == '{', wantKey: d == '{', typ: elem})
			continue
		}
		valueDone()
	}
}

// plainType dereferences pointers; nil for types that decode themselves
// (json.Unmarshaler) or hold anything (interfaces): their keys are not
// checked.
func plainType(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface || t.Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil
	}
	return t
}

// itemType is the type of an element of the array type t.
func itemType(t reflect.Type) reflect.Type {
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		return plainType(t.Elem())
	}
	return nil
}

// memberType is the type of key in the object type t, and whether key
// names no field of the struct t.
func memberType(t reflect.Type, key string) (reflect.Type, bool) {
	switch {
	case t == nil:
		return nil, false
	case t.Kind() == reflect.Map:
		return plainType(t.Elem()), false
	case t.Kind() != reflect.Struct:
		return nil, false
	}
	fields := map[string]reflect.Type{}
	jsonFields(t, fields)
	if ft, ok := fields[key]; ok {
		return plainType(ft), false
	}
	for name, ft := range fields {
		if strings.EqualFold(name, key) {
			return plainType(ft), false
		}
	}
	return nil, true
}

// jsonFields adds the JSON names of the struct t's fields (with those of
// embedded structs) to out.
func jsonFields(t reflect.Type, out map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			jsonFields(ft, out)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := out[name]; !dup {
			out[name] = f.Type
		}
	}
}
