package binpages

// Result says what Release asked the kernel to reclaim.
type Result struct {
	// Spans are the read-only mappings of the executable advised.
	Spans int
	// Bytes is their total length (what was mapped, not what was resident).
	Bytes uint64
}
