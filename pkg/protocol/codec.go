package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
)

// MaxMessageSize bounds every wire message and API body (64 KiB).
const MaxMessageSize = 64 << 10

// Encode marshals a message after validating it, so that nothing invalid is
// ever sent. v must be one of the message types of this package.
func Encode(m interface{ Validate() error }) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	var b []byte
	var err error
	if a, ok := m.(jsonAppender); ok {
		// The bytes json.Marshal writes (appendjson.go). 512 holds a report
		// (an agent keeps up to 8 windows of them in memory); an event
		// grows the buffer once.
		b, err = a.AppendJSON(make([]byte, 0, 512))
	} else {
		b, err = json.Marshal(m)
	}
	return encoded(b, err)
}

// encoded is the end of Encode and EncodeRun: an encoder's error, or a
// message over MaxMessageSize, as a *FieldError.
func encoded(b []byte, err error) ([]byte, error) {
	if err != nil {
		return nil, fieldErrf(ErrInvalid, "", "encode: %v", err)
	}
	if len(b) > MaxMessageSize {
		return nil, fieldErrf(ErrTooLarge, "", "message is %d bytes, at most %d allowed", len(b), MaxMessageSize)
	}
	return b, nil
}

// decode checks size and version, then strictly unmarshals data into m and
// validates it. The message is parsed once: its version is read from the
// decoded V field, and only when the strict decode fails is the "v" key
// read on its own, so that a message of an unsupported version is refused
// as such (ErrVersion) rather than for fields this build does not know.
func decode[M interface{ Validate() error }](data []byte, m M) error {
	return decodeWith(nil, data, m)
}

// decodeWith is decode with fast tried first for the strict unmarshal
// (strictUnmarshalWith).
func decodeWith[M interface{ Validate() error }](fast Unmarshal, data []byte, m M) error {
	if len(data) > MaxMessageSize {
		return fieldErrf(ErrTooLarge, "", "message is %d bytes, at most %d allowed", len(data), MaxMessageSize)
	}
	v, hasV := versionField(m)
	if !hasV {
		if err := headVersion(data); err != nil {
			return err
		}
	}
	if err := strictUnmarshalWith(fast, data, m); err != nil {
		if verr := headVersion(data); verr != nil {
			return verr
		}
		return err
	}
	if hasV {
		if err := checkVersion(int(v.Int())); err != nil {
			return err
		}
	}
	return m.Validate()
}

// versionField returns the V field of the struct m points to.
func versionField(m any) (reflect.Value, bool) {
	rv := reflect.ValueOf(m)
	if rv.Kind() != reflect.Pointer || rv.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := rv.Elem().FieldByName("V")
	if !f.IsValid() || f.Kind() != reflect.Int {
		return reflect.Value{}, false
	}
	return f, true
}

// headVersion reads the "v" key of data alone and checks it.
func headVersion(data []byte) error {
	var head struct {
		V json.RawMessage `json:"v"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return jsonErr(err)
	}
	var v int
	if len(head.V) > 0 {
		if err := json.Unmarshal(head.V, &v); err != nil {
			return fieldErr(ErrVersion, "v", "must be an integer")
		}
	}
	return checkVersion(v)
}

// decodeAs decodes and validates one message of type M (decode).
func decodeAs[M any, PM interface {
	*M
	Validate() error
}](data []byte) (M, error) {
	return decodeAsWith[M, PM](nil, data)
}

// decodeAsWith is decodeAs with fast tried first (strictUnmarshalWith).
func decodeAsWith[M any, PM interface {
	*M
	Validate() error
}](fast Unmarshal, data []byte) (M, error) {
	var m M
	if err := decodeWith(fast, data, PM(&m)); err != nil {
		var zero M
		return zero, err
	}
	return m, nil
}

// strictUnmarshal unmarshals exactly one JSON value, rejecting unknown
// fields and trailing data, and turns json errors into *FieldError.
func strictUnmarshal(data []byte, v any) error {
	return strictUnmarshalWith(nil, data, v)
}

// strictUnmarshalWith is strictUnmarshal with fast, when not nil, tried
// first: when it decodes data, that is the result; when it refuses it,
// what it left in v is cleared and encoding/json decodes data again, so
// that the error (or, should fast refuse what encoding/json takes, the
// value) is encoding/json's.
func strictUnmarshalWith(fast Unmarshal, data []byte, v any) error {
	// Before decoding: the decoder would replace bad text by U+FFFD.
	if err := checkStrings(data); err != nil {
		return err
	}
	if fast != nil {
		if fast(data, v) == nil {
			return nil
		}
		reflect.ValueOf(v).Elem().SetZero()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if _, ok := unknownField(err); ok {
			if p := unknownFieldPath(data, reflect.TypeOf(v)); p != "" {
				return invalid(p, "unknown field")
			}
		}
		return jsonErr(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalid("", "trailing data after the JSON value")
	}
	return nil
}

// unknownField returns the field name of an unknown-field error of
// encoding/json, which reports it only as text: `json: unknown field "x"`.
func unknownField(err error) (string, bool) {
	name, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	return strings.Trim(name, `"`), ok
}

// jsonErr converts an encoding/json error into a *FieldError naming the field.
func jsonErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(root)"
		}
		return invalid(field, "must be a %s, got JSON %s", te.Type, te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return invalid("", "malformed JSON at byte %d: %v", se.Offset, se)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid("", "empty or truncated JSON")
	}
	if name, ok := unknownField(err); ok {
		return invalid(name, "unknown field")
	}
	// Errors from a field's own UnmarshalJSON (Duration) carry no field name.
	return invalid("", "%v", err)
}
