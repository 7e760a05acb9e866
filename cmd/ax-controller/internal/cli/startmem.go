package cli

import (
	"context"
	"runtime/debug"

	"github.com/axsched/ax/controller"
)

// startGCPercent is the garbage collector's target while the controller
// starts. The start reads every live job and execution once (300,000
// pending one-shot jobs: 600,000 records decoded) and keeps most of
// them; collecting at GOGC 100 while the heap grows spent a third of
// the start's CPU on the collector.
const startGCPercent = 400

// startController starts ctrl with the collector's target raised, then
// puts it back and returns to the OS the heap the start left idle (with
// 300,000 pending one-shot jobs, 1.15 GB idle beside 0.63 GB in use,
// which Go's scavenger would keep for minutes). Both are process-wide
// settings, so they live here, in the command, not in the controller
// package a program may embed.
func startController(ctx context.Context, ctrl *controller.Controller) error {
	old := debug.SetGCPercent(startGCPercent)
	if old < 0 || old > startGCPercent {
		debug.SetGCPercent(old) // GOGC=off or higher: the operator's choice stands
	}
	err := ctrl.Start(ctx)
	debug.SetGCPercent(old)
	go debug.FreeOSMemory()
	return err
}
