// Package securitytest holds the end-to-end security tests of ax: a real
// controller with nats.auth: nkeys, agents enrolled through the HTTP API,
// and real agents that do all their work with only their own credentials.
// It has no non-test code.
package securitytest
