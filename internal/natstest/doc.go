// Package natstest starts real embedded nats-servers with JetStream for
// tests: a random loopback port, a store under t.TempDir(), and Stop/Restart
// on the same port and store so that tests can take the server away and
// bring it back; a three-node JetStream cluster. It also holds what tests
// do against such a server again and again: a connection with its
// JetStream context (JetStream), and a recorder of the execution events a
// controller publishes (WatchEvents as a core subscriber sees them,
// WatchStoredEvents as AX_EVT stores them).
package natstest
