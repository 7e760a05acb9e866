// Package protocol holds every message that crosses the wire between
// ax-agent and ax-controller, the NATS subjects and stream names they use,
// the ID formats, the name rules and the size limits.
//
// Both sides import this package and nothing else of each other. It does no
// I/O and no logging.
//
// Every message carries the protocol version in its "v" field. The version
// only goes up (see Version and the history in version.go). Decoders
// (DecodeCommand, DecodeReport, DecodeRegister, ...) reject, with an error
// naming the field:
//
//   - data larger than MaxMessageSize (ErrTooLarge),
//   - a version this build does not speak (ErrVersion),
//   - unknown fields, missing required fields, values out of range, and names
//     unsafe as NATS subject tokens or KV keys (ErrInvalid, as *FieldError).
//
// Encode validates a message and writes it as json.Marshal would; an
// Execution, an Event and a Report are written by hand-written encoders
// (AppendJSON, appendjson.go) that give the same bytes at a quarter to
// two fifths of the cost, held to json.Marshal by
// FuzzAppendJSONMatchesMarshal.
//
// Worked example, the agent side of one execution:
//
//	job := cmd.Assign.Job                          // from DecodeCommand
//	id := protocol.ExecID(job.ID, scheduled)       // "ax-ctl1-20261129120000-k3x9qa-1796000000000"
//	r := protocol.Report{V: protocol.Version, Kind: protocol.ReportTriggered, ...}
//	subj := protocol.ReportSubject(protocol.Shard(job.ID, shards), agentID)
//	msgID := salt + "/" + r.MsgID()                // "<salt>/<exec_id>/1/triggered": JetStream de-duplicates on it
package protocol
