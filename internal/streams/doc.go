// Package streams creates or upgrades, idempotently, the JetStream streams
// and KV buckets of ax (docs/architecture.md: Streams and buckets): AX_CMD, AX_RPT, AX_EVT and the buckets
// ax_jobs, ax_execs, ax_idem, ax_agents, ax_leases, ax_epochs, ax_liveness, ax_marks. The controller calls
// Ensure at start; agent tests call it to stand in for the controller.
package streams
