package controller

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// followKV applies every entry of w: the values present when it was made
// before it returns (ctx bounds that wait), then the changes — other
// replicas' writes too — on a goroutine started with goRun, until the
// controller stops. It owns w and stops it.
func followKV(ctx context.Context, w jetstream.KeyWatcher, apply func(jetstream.KeyValueEntry), goRun func(func(context.Context))) error {
	for initial := true; initial; {
		select {
		case <-ctx.Done():
			_ = w.Stop()
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil
			}
			if e == nil {
				initial = false
				continue
			}
			apply(e)
		}
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
