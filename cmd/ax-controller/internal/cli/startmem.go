package cli

import (
	"context"

	"github.com/axsched/ax/controller"
)

// startController starts ctrl, then returns to the OS the heap the start
// left idle (freeMemory), which Go's scavenger would otherwise keep for
// minutes: the start reads every live job and execution once (300,000
// pending one-shot jobs: 600,000 records decoded) and keeps a fraction of
// what it allocated. What the embedded server keeps cached for a while
// after the start the trimmer returns once it expired (memTrim's settle).
// The collector's target is the operator's (GOGC): raising it to 400 for
// the start, as ax once did, spent as much CPU growing and clearing a heap
// 1.5 times larger (peak RSS 1.2–1.3 GB against 0.8 GB with 300,000
// pending) as it saved collecting, and the start took as long.
// FreeOSMemory is process-wide, so it lives here, in the command, not in
// the controller package a program may embed.
func startController(ctx context.Context, ctrl *controller.Controller) error {
	err := ctrl.Start(ctx)
	go freeMemory()
	return err
}
