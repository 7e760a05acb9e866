package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/axsched/ax/internal/binpages"
)

// releasePagesLater gives back, once d after it is called, the pages of
// this executable its start-up mapped (internal/binpages: code and
// read-only data run once), and logs what it did; it returns
// early, releasing nothing, when ctx ends first. d ≤ 0: it returns at once.
func releasePagesLater(ctx context.Context, d time.Duration, log *slog.Logger) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	res, err := binpages.Release()
	switch {
	case errors.Is(err, binpages.ErrUnsupported):
		log.Info("binary pages not released", "err", err)
	case err != nil && res.Spans == 0:
		log.Warn("binary pages not released", "err", err)
	case err != nil:
		log.Warn("binary pages released, page cache kept", "mappings", res.Spans, "mapped_bytes", res.Bytes,
			"skipped", res.Skipped, "err", err)
	default:
		log.Info("binary pages released", "mappings", res.Spans, "mapped_bytes", res.Bytes, "skipped", res.Skipped)
	}
}
