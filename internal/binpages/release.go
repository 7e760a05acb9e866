package binpages

// Result says what Release did.
type Result struct {
	// Spans are the read-only mappings of the executable released, Bytes
	// their total length (what was mapped, not what was resident).
	Spans int
	Bytes uint64
	// Skipped are the read-only mappings left alone because they hold
	// pages of the process's own (relocated read-only data).
	Skipped int
	// CacheDropped: the executable's pages that no process maps were
	// dropped from the page cache too.
	CacheDropped bool
}
