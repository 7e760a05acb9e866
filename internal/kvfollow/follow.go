package kvfollow

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Follow applies every entry of w: the values present when it was made
// before it returns (ctx bounds that wait), then the changes — other
// replicas' writes too — on a goroutine started with goRun, until the
// context goRun passes ends. It owns w and stops it. The values present
// at the start are applied by `workers` goroutines at once (the changes
// after them in order, on one). apply must then be safe for concurrent use and give the same
// result in any order of the keys' entries (a cache that keeps the
// highest revision of each key): a key changed during the first pass
// comes twice. The job cache loads 300,000 jobs so, decoding on every
// core while the watcher reads.
func Follow(ctx context.Context, w jetstream.KeyWatcher, apply func(jetstream.KeyValueEntry), workers int, goRun func(func(context.Context))) error {
	work := make(chan jetstream.KeyValueEntry, 256*workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				apply(e)
			}
		}()
	}
	err := func() error {
		defer func() {
			close(work)
			wg.Wait()
		}()
		for {
			select {
			case <-ctx.Done():
				_ = w.Stop()
				return ctx.Err()
			case e, ok := <-w.Updates():
				if !ok {
					return errWatchStopped
				}
				if e == nil {
					return nil
				}
				work <- e
			}
		}
	}()
	if errors.Is(err, errWatchStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	goRun(func(ctx context.Context) {
		defer func() { _ = w.Stop() }()
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e != nil {
					apply(e)
				}
			}
		}
	})
	return nil
}
