package ops

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// aptPackages are the Debian packages that provide the tools the package
// tests use.
var aptPackages = map[string]string{"lintian": "lintian", "rpm": "rpm", "rpm2archive": "rpm2cpio", "dpkg-deb": "dpkg"}

var aptInstall struct {
	sync.Mutex
	tried map[string]bool
}

// need skips t unless tool is installed. In CI (CI=true) as root it first
// installs the tool's Debian package with apt-get, once per test binary.
func need(t *testing.T, tool string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err == nil {
		return
	}
	pkg := aptPackages[tool]
	if os.Getenv("CI") != "true" || os.Geteuid() != 0 || pkg == "" {
		t.Skipf("%s is not installed: skipped (CI installs it; here: apt-get install %s)", tool, pkg)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skipf("%s is not installed and there is no apt-get to install it: skipped", tool)
	}
	aptInstall.Lock()
	defer aptInstall.Unlock()
	if aptInstall.tried == nil {
		aptInstall.tried = map[string]bool{}
	}
	if !aptInstall.tried[pkg] {
		aptInstall.tried[pkg] = true
		env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		steps := [][]string{{"install", "-y", "--no-install-recommends", pkg}}
		if !aptInstall.tried["apt-get update"] {
			aptInstall.tried["apt-get update"] = true
			steps = append([][]string{{"update"}}, steps...)
		}
		for _, args := range steps {
			cmd := exec.Command("apt-get", args...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("CI: apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		t.Logf("CI: installed the Debian package %s for %s", pkg, tool)
	}
	if _, err := exec.LookPath(tool); err != nil {
		t.Fatalf("%s: still not found after apt-get install %s", tool, pkg)
	}
}

// testPackageInstall installs both .deb packages into a throw-away root
// with dpkg --root, running their maintainer scripts outside a chroot with
// DPKG_ROOT set (--force-script-chrootless; the scripts honour DPKG_ROOT).
// It checks the user and group ax, the owners and modes on disk, that the
// services are enabled and not started, runs the installed binaries, then
// purges both packages and checks that nothing of them is left.
func testPackageInstall(t *testing.T, b builtPackages) {
	if os.Geteuid() != 0 {
		t.Skip("not root: dpkg --root cannot give /var/lib/ax/<name> to the user ax (the unpacked-tree checks ran)")
	}
	need(t, "dpkg")
	for _, tool := range []string{"deb-systemd-helper", "useradd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: skipped", tool)
		}
	}
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates", "var/log", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string]string{
		"var/lib/dpkg/status": "", "var/lib/dpkg/available": "",
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n", "etc/group": "root:x:0:\n",
		"etc/shadow": "root:*:20000:0:99999:7:::\n", "etc/gshadow": "root:*::\n",
	} {
		if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dpkg := func(args ...string) string {
		t.Helper()
		all := append([]string{"--root=" + root, "--force-script-chrootless", "--log=" + filepath.Join(root, "var/log/dpkg.log")}, args...)
		out, err := exec.Command("dpkg", all...).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg %s: %v\n%s", strings.Join(all, " "), err, out)
		}
		return string(out)
	}
	hostHadAx := lookupID(t, "/etc/passwd", "ax") != ""
	out := dpkg("--install", b.files["ax-agent.deb"], b.files["ax-controller.deb"])
	for _, name := range []string{"ax-agent", "ax-controller"} {
		if !strings.Contains(out, name+" is installed and enabled, but not started.") ||
			!strings.Contains(out, "Start it:  systemctl start "+name) {
			t.Errorf("postinst of %s did not say how to start it:\n%s", name, out)
		}
	}
	uid := lookupID(t, filepath.Join(root, "etc/passwd"), "ax")
	gid := lookupID(t, filepath.Join(root, "etc/group"), "ax")
	if uid == "" || gid == "" {
		t.Fatalf("preinst made no user or group ax in %s/etc (uid %q, gid %q)", root, uid, gid)
	}
	if !hostHadAx && lookupID(t, "/etc/passwd", "ax") != "" {
		t.Error("the maintainer scripts created the user ax on this host, not under DPKG_ROOT")
	}
	for _, name := range []string{"ax-agent", "ax-controller"} {
		checkOwner(t, filepath.Join(root, "var/lib/ax", name), 0o700|os.ModeDir, uid, "ax", gid)
		checkOwner(t, filepath.Join(root, "etc/ax", name+".yaml"), 0o640, "0", "root", gid)
		link := filepath.Join(root, "etc/systemd/system/multi-user.target.wants", name+".service")
		if dst, err := os.Readlink(link); err != nil || dst != "/usr/lib/systemd/system/"+name+".service" {
			t.Errorf("%s.service is not enabled: %s -> %q (%v)", name, link, dst, err)
		}
		bin := filepath.Join(root, "usr/bin", name)
		if out, err := exec.Command(bin, "version").CombinedOutput(); err != nil || !strings.Contains(string(out), b.version) {
			t.Errorf("installed %s version: %q (%v)", name, out, err)
		}
		printConfig(t, bin, name, filepath.Join(root, "etc/ax", name+".yaml"))
	}

	dpkg("--purge", "ax-agent", "ax-controller")
	var left []string
	err := filepath.Walk(root, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case rel == "." || strings.HasPrefix(rel, "var/lib/dpkg") || strings.HasPrefix(rel, "var/log") ||
			strings.HasPrefix(rel, "etc/") && !strings.HasPrefix(rel, "etc/ax") && !strings.HasPrefix(rel, "etc/systemd"):
			return nil
		case fi.IsDir():
			return nil // empty directories of dpkg and deb-systemd-helper (etc, var/lib/systemd)
		}
		left = append(left, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"etc/ax", "var/lib/ax", "usr/share/ax"} {
		if _, err := os.Lstat(filepath.Join(root, d)); err == nil {
			left = append(left, d+"/")
		}
	}
	if len(left) > 0 {
		t.Errorf("purge left %v", left)
	}
	if lookupID(t, filepath.Join(root, "etc/passwd"), "ax") != "" || lookupID(t, filepath.Join(root, "etc/group"), "ax") != "" {
		t.Error("purge of the last ax package left the user or group ax")
	}
}

// lookupID returns the numeric id of name in a passwd or group file.
func lookupID(t *testing.T, file, name string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Split(sc.Text(), ":"); len(fields) > 3 && fields[0] == name {
			return fields[2]
		}
	}
	return ""
}

// checkOwner checks the mode and numeric owner of path.
func checkOwner(t *testing.T, path string, mode os.FileMode, uid, user, gid string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Error(err)
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode()&(os.ModeDir|os.ModePerm) != mode {
		t.Errorf("%s: mode %v, want %v", path, fi.Mode(), mode)
	}
	if got := strconv.FormatUint(uint64(st.Uid), 10) + ":" + strconv.FormatUint(uint64(st.Gid), 10); got != uid+":"+gid {
		t.Errorf("%s: owner %s, want %s:%s (%s:ax)", path, got, uid, gid, user)
	}
}
