package protocol

// Unmarshal is a strict JSON unmarshal that a Decoder tries before
// encoding/json: it refuses unknown fields and data after the value, and
// calls the types' own UnmarshalJSON methods.
type Unmarshal func(data []byte, v any) error

// Decoder decodes the messages whose decoding shows on a hot path: an
// agent's reports (at the controller, one or more per execution) and the
// job bodies of the API. Its zero value is DecodeReport and DecodeJob.
//
// Fast, when set, is tried first for the strict unmarshal. Every other
// check is the same either way: the size bound, the text check of every
// string (before any decoder sees it), the version, Validate. Fast must
// accept only what encoding/json's strict decode accepts and decode it
// to the same value; when it returns an error, encoding/json decodes the
// message again and its error is the one returned, so a refused message
// reads the same with or without Fast. internal/strictjson is such an
// Unmarshal (its fuzz test holds it to this against encoding/json).
type Decoder struct {
	// Fast is the strict unmarshal tried first; nil for encoding/json alone.
	Fast Unmarshal
}
