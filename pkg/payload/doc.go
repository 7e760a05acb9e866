// Package payload holds the payloads of the two handlers built into every
// agent, exec and http: their fields, and the checks a payload must pass
// before anything runs. The agent's handlers decode each attempt's payload
// with it (agent/handler); the controller checks a job's payload with the
// same code when the job is created or updated (Validate), so a payload
// the agent would refuse is refused at the API, naming its field, instead
// of failing every attempt on the device.
//
// What only the agent can check stays there: whether a command is in its
// exec.allow, an env name in its exec.env_allow, a URL in its http.allow.
// A payload that passes here can still be refused by the agent that runs
// it.
//
// Both decoders refuse unknown fields, so a misspelt field ("comand") is an
// error rather than a silently empty value. The handler names are fixed:
// an embedding program cannot register a Go handler named exec or http,
// so a job with either name always runs one of these.
//
//	exec: {"command": "/abs/path", "args": [...], "stdin": "...", "env": {"NAME": "value"}, "dir": "/path"}
//	http: {"method": "POST", "url": "https://host/path", "headers": {"Name": "value"}, "body": "..."}
//
// The package does no I/O.
package payload
