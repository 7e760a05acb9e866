package protocol

// Version is the protocol version this build speaks and writes into every
// message's "v" field. It only goes up; a change of any message's meaning or
// required fields gets a new number and a line in the history below.
//
// History:
//
//	1 (2026-11-29): first version: register, heartbeat, commands (assign,
//	  unassign, run, cancel, lease_grant, lease_revoke), reports (triggered,
//	  running, finished, skipped, interrupted), events.
const Version = 1

// MinVersion is the oldest protocol version this build still accepts.
const MinVersion = 1

// checkVersion validates a message's "v" field.
func checkVersion(v int) error {
	if v == 0 {
		return fieldErr(ErrVersion, "v", "is required")
	}
	if v < MinVersion || v > Version {
		return fieldErrf(ErrVersion, "v", "version %d not supported (this build speaks %d..%d)", v, MinVersion, Version)
	}
	return nil
}
