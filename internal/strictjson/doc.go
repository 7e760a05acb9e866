// Package strictjson is the fast strict JSON unmarshal the controller
// tries first on input it does not trust: an agent's reports and the
// API's job bodies (protocol.Decoder.Fast). It owns one choice: decoding
// that input with github.com/segmentio/encoding/json (the decoder
// internal/storedjson uses for ax's own records), refusing unknown fields
// and data after the value, instead of encoding/json's Decoder.
//
// A report decodes in less than half the time, every check of
// protocol.DecodeReport included: 6.1–6.3 µs and 1,520 B against 2.7–3.0 µs
// and 784 B (BenchmarkDecodeReport in pkg/protocol, one_pass against fast,
// -count 3, one run; the machine read 4.7–4.8 µs for one_pass earlier
// that day).
// The contract that makes it safe is protocol.Decoder's: what Unmarshal
// accepts, encoding/json's strict decode accepts and decodes to the same
// value (FuzzFastMatchesStd in pkg/protocol checks this for every message
// type and keeps its corpus under testdata/fuzz), and whatever it refuses
// is decoded again by encoding/json, whose answer stands. A panic of the
// decoder on hostile input is returned as ErrPanic and takes that path
// too. The decoder reads time.Time with its own ISO 8601 parser, which
// takes text encoding/json refuses ("00:00;00" for "00:00:00", found by
// that fuzz test): Unmarshal refuses (ErrTime) any string that parser
// would read otherwise than time.Time's UnmarshalJSON, before decoding.
//
// The agent does not use it: it decodes few messages (its commands), and
// the decoder would add about 380 KB to its binary.
package strictjson
