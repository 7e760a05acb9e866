package histindex

import (
	"context"
	"fmt"
	"time"
)

// readerIdle is how long a reader connection stays open unused; its page
// cache (up to 8 MiB) goes with it.
const readerIdle = time.Minute

// ReleaseMemory frees the writer connection's page cache (PRAGMA
// shrink_memory). The follower calls it at the end of a quiet minute
// (controller/history.go): the cache fills to its 32 MiB during a burst, and
// modernc's allocator gives each page of 4 KiB a slot of 8 KiB, so a
// full writer cache holds about 60 MB of the process's memory until the
// connection closes. The next batch reads the pages it needs back.
func (h *Index) ReleaseMemory(ctx context.Context) error {
	if _, err := h.wdb.ExecContext(ctx, "PRAGMA shrink_memory"); err != nil {
		return fmt.Errorf("history index: release memory: %w", err)
	}
	return nil
}
