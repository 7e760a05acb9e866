package kvfollow

import "errors"

// errWatchStopped: a KV watcher's updates channel closed during the first
// pass (the watcher was stopped); Follow returns nil then, as after the
// first pass.
var errWatchStopped = errors.New("watcher stopped")
