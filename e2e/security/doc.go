// Package security holds the end-to-end security tests of ax: a real
// controller with nats.auth: nkeys, agents enrolled through the HTTP API,
// real agents that do all their work with only their own credentials, an
// enrolled agent's own connection trying to make the controller or the
// server write into the ax account through reply subjects (controller
// replies, PubAcks, pull statuses) and push consumers, and a nats-server
// started from configs/nats-accounts.conf. It has no non-test code.
package security
