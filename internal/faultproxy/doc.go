// Package faultproxy is a small TCP proxy for tests that cuts and heals a
// link for real: Cut closes every open connection and refuses new ones
// until Heal. Use it between an agent and its NATS server to produce
// partitions without stopping either process. Freeze keeps the
// connections open and forwards nothing until Thaw: what the server sees
// of a process stopped with SIGSTOP, or of a link that drops packets
// without a reset (the peer's requests wait for a reply that does not
// come).
package faultproxy
