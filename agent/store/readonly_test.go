package store

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// readOnlyView returns a read-only view of dir: a read-only bind mount when
// running as root (permission bits do not stop root), chmod 0555 otherwise.
func readOnlyView(t *testing.T, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(filepath.Join(dir, "agent.db"), 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		return dir
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "--bind", "-o", "ro", dir, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot make a read-only bind mount as root: %v: %s", err, out)
	}
	// Some kernels need a remount to apply ro to a bind mount.
	_ = exec.Command("mount", "-o", "remount,bind,ro", mnt).Run()
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	return mnt
}
