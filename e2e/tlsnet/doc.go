// Package tlsnet holds the end-to-end TLS tests of ax: a real controller
// whose embedded NATS server serves TLS and verifies client certificates,
// an external nats-server with TLS, and real agents that connect with and
// without the right certificates (a counting proxy shows whether a refused
// agent got past the handshake). The certificates come from
// internal/tlstest. It has no non-test code.
package tlsnet
