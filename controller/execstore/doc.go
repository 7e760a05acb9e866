// Package execstore is the one writer of KV ax_execs, the controller's
// live execution records. Every record written — by the API, the retries,
// the lease code and the report lanes alike — goes through Put (a
// synchronous compare-and-set on the revision it was read at, a create
// when there was none) or PutAsync (a pipelined one: an asynchronous
// publish with the expected last sequence of the key's subject, whose
// acks a report lane collects per batch with Wait), and every removal
// through Retire (a purge with compare-and-set; its marker carries a
// per-message TTL where ax_execs takes them, WithMarkerTTL, and otherwise
// is a Marker the sweeper purges up to on its next pass). A lost
// compare-and-set is ErrCASConflict, for the caller to read again and
// re-apply its event.
// Nothing else publishes on $KV.ax_execs.> (the controller's
// TestOneExecWriter checks its source).
//
// What a record may become is not decided here: controller/execution's
// Apply decides, and the store only writes its answer.
package execstore
