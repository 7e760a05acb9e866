// Package natstest starts real embedded nats-servers with JetStream for
// tests: a random loopback port, a store under t.TempDir(), and Stop/Restart
// on the same port and store so that tests can take the server away and
// bring it back.
package natstest
