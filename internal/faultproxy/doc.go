// Package faultproxy is a small TCP proxy for tests that cuts and heals a
// link for real: Cut closes every open connection and refuses new ones
// until Heal. Use it between an agent and its NATS server to produce
// partitions without stopping either process.
package faultproxy
