// Package natscreds turns a credentials file into a nats.go connect option.
// Both the agent (nats.creds) and the controller's tools (nats.creds_file)
// accept either a NATS credentials file (user JWT and seed, operator mode)
// or a bare NKey seed file (as written by `ax-controller agent enroll`).
package natscreds
