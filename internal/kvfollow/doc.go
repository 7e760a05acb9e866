// Package kvfollow follows a JetStream KV bucket into memory: the values
// present when a watcher was made are applied before Follow returns (on
// several goroutines when asked: the controller's job cache loads 300,000
// jobs so), then every change, other writers' too, on one goroutine for
// as long as the caller's runner lets it. The controller's caches (jobs,
// agents, leases, lease grants) are kept this way.
package kvfollow
