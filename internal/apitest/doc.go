// Package apitest serves a real controller (embedded NATS on a random
// port, store in a test's temporary directory) behind the real HTTP API
// handler, for tests of the API's clients: the Go client and the CLI.
package apitest
