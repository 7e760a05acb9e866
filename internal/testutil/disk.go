package testutil

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// SmallDisk mounts a tmpfs of size (mount's size= option, e.g. "64m") on
// a fresh temporary directory and returns it, for tests of a full disk.
// It needs Linux and root, and skips the test without them or when mount
// fails. The mount is removed when the test ends, after the cleanups
// registered later (the processes and stores using it) have run.
func SmallDisk(tb testing.TB, size string) string {
	tb.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		tb.Skip("needs Linux and root to mount a small tmpfs")
	}
	dir := tb.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		tb.Skipf("mount tmpfs: %v: %s", err, out)
	}
	// Registered after TempDir's removal, so it runs before it.
	tb.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// FillDisk writes path until its file system is full (ENOSPC).
func FillDisk(tb testing.TB, path string) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			tb.Fatalf("fill the disk: %v", err)
		}
	}
}
