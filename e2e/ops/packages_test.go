package ops

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// pkgEntry is one file of a package: mode as `ls -l` shows it, owner, group.
type pkgEntry struct {
	perms, owner, group string
}

// wantEntries are the files every package holds; @ is the package name.
var wantEntries = map[string]pkgEntry{
	"/usr/bin/@":                           {"-rwxr-xr-x", "root", "root"},
	"/usr/lib/systemd/system/@.service":    {"-rw-r--r--", "root", "root"},
	"/etc/ax/@.yaml":                       {"-rw-r-----", "root", "ax"},
	"/usr/share/ax/@.yaml":                 {"-rw-r--r--", "root", "root"},
	"/etc/ax":                              {"drwxr-xr-x", "root", "root"},
	"/var/lib/ax":                          {"drwxr-xr-x", "root", "root"},
	"/var/lib/ax/@":                        {"drwx------", "ax", "ax"},
	"/usr/share/doc/@/copyright":           {"-rw-r--r--", "root", "root"}, // deb
	"/usr/share/licenses/@/copyright":      {"-rw-r--r--", "root", "root"}, // rpm
	"/usr/share/doc/@/changelog.Debian.gz": {"-rw-r--r--", "root", "root"}, // deb
}

// controllerCompletions are the completion scripts of ax-controller.
var controllerCompletions = map[string][]string{
	"deb": {"/usr/share/bash-completion/completions/ax-controller", "/usr/share/zsh/vendor-completions/_ax-controller",
		"/usr/share/fish/vendor_completions.d/ax-controller.fish"},
	"rpm": {"/usr/share/bash-completion/completions/ax-controller", "/usr/share/zsh/site-functions/_ax-controller",
		"/usr/share/fish/vendor_completions.d/ax-controller.fish"},
}

// builtPackages is the output of one scripts/package.sh run for the host.
type builtPackages struct {
	dist, pkgVersion, version string
	arch                      string            // Debian architecture of the host
	files                     map[string]string // "ax-agent.deb" → path
}

// buildPackages runs scripts/package.sh for the host's architecture only
// (make dist builds all four; the others differ in the binary alone, which
// TestCrossBuildAgent checks), both binaries, .deb and .rpm.
func buildPackages(t *testing.T) builtPackages {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the package build takes about a minute")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("packages are tested on linux/amd64 and linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	b := builtPackages{dist: t.TempDir(), version: "v1.4.0-2-g0abc123", pkgVersion: "1.4.0+2.g0abc123", arch: runtime.GOARCH,
		files: map[string]string{}}
	start := time.Now()
	cmd := exec.Command("bash", repoPath(t, "scripts", "package.sh"))
	// gzip: xz, the default, takes about 25 s per package here.
	cmd.Env = append(os.Environ(), "DIST="+b.dist, "TARGETS=linux/"+runtime.GOARCH, "VERSION="+b.version,
		"COMMIT=0abc123", "DATE=2026-01-02T03:04:05Z", "PKG_COMPRESSION=gzip")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("package.sh: %v\n%s", err, out)
	}
	t.Logf("package.sh (linux/%s, 2 binaries, deb and rpm): %v", runtime.GOARCH, time.Since(start).Round(100*time.Millisecond))
	rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]
	for _, name := range []string{"ax-agent", "ax-controller"} {
		b.files[name+".deb"] = filepath.Join(b.dist, fmt.Sprintf("%s_%s-1_%s.deb", name, b.pkgVersion, b.arch))
		b.files[name+".rpm"] = filepath.Join(b.dist, fmt.Sprintf("%s-%s-1.%s.rpm", name, b.pkgVersion, rpmArch))
	}
	sums := readSums(t, filepath.Join(b.dist, "SHA256SUMS"))
	for _, path := range b.files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("package.sh made no %s: %v\n%s", filepath.Base(path), err, out)
		}
		h := sha256.Sum256(data)
		if got := sums[filepath.Base(path)]; got != hex.EncodeToString(h[:]) {
			t.Errorf("SHA256SUMS: %s has %q, the file hashes to %x", filepath.Base(path), got, h)
		}
	}
	if len(sums) != 2+len(b.files) {
		t.Errorf("SHA256SUMS lists %d files, want the 2 binaries and %d packages", len(sums), len(b.files))
	}
	return b
}

// TestPackages builds the packages for the host and checks them: metadata,
// contents with modes and owners, the conffile, the unit (systemd-analyze
// verify), the maintainer scripts (sh -n), lintian, and each package
// unpacked into a throw-away tree, where the installed binary's version and
// --print-config run; as root, an install and purge with dpkg --root.
func TestPackages(t *testing.T) {
	b := buildPackages(t)
	// In parallel: lintian alone takes about 25 s.
	t.Run("deb", func(t *testing.T) { t.Parallel(); checkDebs(t, b) })
	t.Run("rpm", func(t *testing.T) { t.Parallel(); checkRPMs(t, b) })
	t.Run("install", func(t *testing.T) { t.Parallel(); testPackageInstall(t, b) })
	t.Run("lintian", func(t *testing.T) {
		t.Parallel()
		need(t, "lintian")
		start := time.Now()
		args := []string{"--fail-on", "error,warning", "--allow-root", b.files["ax-agent.deb"], b.files["ax-controller.deb"]}
		out, err := exec.Command("lintian", args...).CombinedOutput()
		t.Logf("lintian: %v", time.Since(start).Round(100*time.Millisecond))
		if err != nil {
			t.Errorf("lintian %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
}

func checkDebs(t *testing.T, b builtPackages) {
	need(t, "dpkg-deb")
	for _, name := range []string{"ax-agent", "ax-controller"} {
		deb := b.files[name+".deb"]
		field := func(f string) string {
			out, err := exec.Command("dpkg-deb", "--field", deb, f).Output()
			if err != nil {
				t.Fatalf("dpkg-deb --field %s: %v", f, err)
			}
			return strings.TrimSpace(string(out))
		}
		for f, want := range map[string]string{"Package": name, "Version": b.pkgVersion + "-1", "Architecture": b.arch} {
			if got := field(f); got != want {
				t.Errorf("%s: %s is %q, want %q", name, f, got, want)
			}
		}
		out, err := exec.Command("dpkg-deb", "--contents", deb).Output()
		if err != nil {
			t.Fatalf("dpkg-deb --contents: %v", err)
		}
		got := map[string]pkgEntry{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			// drwxr-xr-x root/root 0 2026-01-02 03:04 ./etc/ax/
			f := strings.Fields(line)
			if len(f) < 6 {
				t.Fatalf("dpkg-deb --contents: odd line %q", line)
			}
			owner, group, _ := strings.Cut(f[1], "/")
			path := strings.TrimSuffix(strings.TrimPrefix(f[5], "."), "/")
			got[path] = pkgEntry{f[0], owner, group}
		}
		checkEntries(t, name, "deb", got)
		conf, err := exec.Command("dpkg-deb", "--info", deb, "conffiles").Output()
		if err != nil || strings.TrimSpace(string(conf)) != "/etc/ax/"+name+".yaml" {
			t.Errorf("%s: conffiles = %q (%v), want /etc/ax/%s.yaml", name, conf, err, name)
		}
		dir := t.TempDir()
		if out, err := exec.Command("dpkg-deb", "--control", deb, filepath.Join(dir, "control")).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb --control: %v\n%s", err, out)
		}
		for _, s := range []string{"preinst", "postinst", "prerm", "postrm"} {
			checkScript(t, name+" "+s, filepath.Join(dir, "control", s))
		}
		tree := filepath.Join(dir, "root")
		if out, err := exec.Command("dpkg-deb", "--extract", deb, tree).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb --extract: %v\n%s", err, out)
		}
		checkTree(t, b, name, tree)
	}
}

func checkRPMs(t *testing.T, b builtPackages) {
	need(t, "rpm")
	for _, name := range []string{"ax-agent", "ax-controller"} {
		rpm := b.files[name+".rpm"]
		meta, err := exec.Command("rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH} %{LICENSE} %{URL}", rpm).Output()
		if err != nil {
			t.Fatalf("rpm -qp: %v", err)
		}
		rpmArch := map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[b.arch]
		if want := fmt.Sprintf("%s %s 1 %s Proprietary https://github.com/axsched/ax", name, b.pkgVersion, rpmArch); string(meta) != want {
			t.Errorf("%s: rpm metadata %q, want %q", name, meta, want)
		}
		out, err := exec.Command("rpm", "-qp", "--qf",
			"[%{FILENAMES}\t%{FILEMODES:perms}\t%{FILEUSERNAME}\t%{FILEGROUPNAME}\t%{FILEFLAGS:fflags}\n]", rpm).Output()
		if err != nil {
			t.Fatalf("rpm -qp --qf: %v", err)
		}
		got := map[string]pkgEntry{}
		for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			f := strings.Split(line, "\t")
			if len(f) != 5 {
				t.Fatalf("rpm -qp: odd line %q", line)
			}
			got[f[0]] = pkgEntry{f[1], f[2], f[3]}
			isConf := strings.Contains(f[4], "c")
			if wantConf := f[0] == "/etc/ax/"+name+".yaml"; isConf != wantConf || wantConf && !strings.Contains(f[4], "n") {
				t.Errorf("%s: %s has file flags %q; only /etc/ax/%s.yaml is config, and noreplace (cn)", name, f[0], f[4], name)
			}
		}
		checkEntries(t, name, "rpm", got)
		scripts, err := exec.Command("rpm", "-qp", "--scripts", rpm).Output()
		if err != nil {
			t.Fatalf("rpm -qp --scripts: %v", err)
		}
		for _, s := range []string{"preinstall", "postinstall", "preuninstall", "postuninstall"} {
			if !bytes.Contains(scripts, []byte(s+" scriptlet")) {
				t.Errorf("%s: no %s scriptlet", name, s)
			}
		}
		dir := t.TempDir()
		tree := filepath.Join(dir, "root")
		if err := os.Mkdir(tree, 0o755); err != nil {
			t.Fatal(err)
		}
		// rpm2archive (rpm >= 4.15) turns the payload into a tar; no cpio needed.
		need(t, "rpm2archive")
		cmd := exec.Command("sh", "-c", `rpm2archive - <"$1" | tar -xzf - -C "$2"`, "sh", rpm, tree)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("rpm2archive | tar: %v\n%s", err, out)
		}
		checkTree(t, b, name, tree)
	}
}

// checkEntries compares a package's file list with wantEntries.
func checkEntries(t *testing.T, name, format string, got map[string]pkgEntry) {
	t.Helper()
	want := map[string]pkgEntry{}
	for p, e := range wantEntries {
		p = strings.ReplaceAll(p, "@", name)
		if format == "rpm" && strings.HasPrefix(p, "/usr/share/doc/") || format == "deb" && strings.HasPrefix(p, "/usr/share/licenses/") {
			continue
		}
		want[p] = e
	}
	if name == "ax-controller" {
		for _, p := range controllerCompletions[format] {
			want[p] = pkgEntry{"-rw-r--r--", "root", "root"}
		}
	}
	if format == "deb" {
		want["/usr/share/lintian/overrides/"+name] = pkgEntry{"-rw-r--r--", "root", "root"}
	}
	for p, w := range want {
		g, ok := got[p]
		switch {
		case !ok:
			t.Errorf("%s.%s: %s is missing", name, format, p)
		case g != w:
			t.Errorf("%s.%s: %s is %s %s:%s, want %s %s:%s", name, format, p, g.perms, g.owner, g.group, w.perms, w.owner, w.group)
		}
	}
	for p, g := range got {
		if _, ok := want[p]; !ok && !strings.HasPrefix(g.perms, "d") {
			t.Errorf("%s.%s: unexpected file %s", name, format, p)
		}
		if _, ok := want[p]; !ok && (g.owner != "root" || g.group != "root" || g.perms != "drwxr-xr-x") {
			t.Errorf("%s.%s: directory %s is %s %s:%s, want drwxr-xr-x root:root", name, format, p, g.perms, g.owner, g.group)
		}
	}
}

// checkScript checks a maintainer script's syntax with sh -n.
func checkScript(t *testing.T, what, path string) {
	t.Helper()
	if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
		t.Errorf("%s: sh -n: %v\n%s", what, err, out)
	}
	if b, err := os.ReadFile(path); err != nil || bytes.Contains(b, []byte("@NAME@")) {
		t.Errorf("%s: not rendered (%v)", what, err)
	}
}

// checkTree checks an unpacked package: the unit is the repository's and
// passes systemd-analyze verify, the conffile holds the documented defaults
// (its --print-config equals the built-in defaults but for data_dir), and
// the binary's version is the one built.
func checkTree(t *testing.T, b builtPackages, name, tree string) {
	t.Helper()
	bin := filepath.Join(tree, "usr", "bin", name)
	unit := filepath.Join(tree, "usr", "lib", "systemd", "system", name+".service")
	u, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	if repo, err := os.ReadFile(repoPath(t, "configs", "systemd", name+".service")); err != nil || !bytes.Equal(u, repo) {
		t.Errorf("%s: the packaged unit differs from configs/systemd/%s.service (%v)", name, name, err)
	}
	verifyUnit(t, name, u, bin)

	out, err := exec.Command(bin, "version").CombinedOutput()
	want := fmt.Sprintf("%s %s (commit 0abc123, built 2026-01-02T03:04:05Z)", name, b.version)
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("%s version = %q (%v), want %q", name, strings.TrimSpace(string(out)), err, want)
	}
	conf := filepath.Join(tree, "etc", "ax", name+".yaml")
	if pristine, err := os.ReadFile(filepath.Join(tree, "usr", "share", "ax", name+".yaml")); err != nil {
		t.Error(err)
	} else if c, _ := os.ReadFile(conf); !bytes.Equal(c, pristine) {
		t.Errorf("%s: /etc/ax/%s.yaml differs from /usr/share/ax/%s.yaml: the unit would start an unedited config", name, name, name)
	}
	got := printConfig(t, bin, name, conf)
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	defaults := printConfig(t, bin, name, empty)
	dataDir := "data_dir: /var/lib/ax/" + name
	if !strings.Contains(got, "\n"+dataDir+"\n") && !strings.HasPrefix(got, dataDir+"\n") {
		t.Errorf("%s --print-config of the conffile has no %q:\n%s", name, dataDir, got)
	}
	if g, d := dropDataDir(got), dropDataDir(defaults); g != d {
		t.Errorf("%s: the conffile's settings are not the built-in defaults\nconffile:\n%s\ndefaults:\n%s", name, g, d)
	}
}

// printConfig runs the installed binary's --print-config on conf.
func printConfig(t *testing.T, bin, name, conf string) string {
	t.Helper()
	cmd := map[string]string{"ax-agent": "run", "ax-controller": "serve"}[name]
	c := exec.Command(bin, cmd, "--config", conf, "--print-config")
	c.Env = []string{"PATH=/usr/bin:/bin"} // no AX_* of the caller
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s --config %s --print-config: %v\n%s", name, cmd, conf, err, out)
	}
	return string(out)
}

func dropDataDir(cfg string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(cfg))
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "data_dir:") {
			b.WriteString(sc.Text() + "\n")
		}
	}
	return b.String()
}

// verifyUnit runs systemd-analyze verify on a unit with ExecStart pointing
// at bin (the unpacked binary), as TestSystemdAnalyzeVerify does.
func verifyUnit(t *testing.T, name string, unit []byte, bin string) {
	t.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Logf("systemd-analyze not installed: %s.service not verified", name)
		return
	}
	path := filepath.Join(t.TempDir(), name+".service")
	if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/bin/"+name), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sa, "verify", path).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify %s.service: %v\n%s", name, err, out)
	}
}

// TestPackageVersion: package.sh turns git describe output into versions
// that dpkg and rpm order as releases are ordered.
func TestPackageVersion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	script := `eval "$(sed -n '/^pkg_version() {/,/^}/p' "$1")"; shift; for v in "$@"; do pkg_version "$v"; done`
	cases := [][2]string{
		{"v1.2.3", "1.2.3"},
		{"v1.2.3-4-gabc1234", "1.2.3+4.gabc1234"},
		{"v1.3.0-rc.1", "1.3.0~rc.1"},
		{"v1.3.0-rc.1-2-gabc1234-dirty", "1.3.0~rc.1.2.gabc1234.dirty"},
		{"3e806a5", "0.0.0~git.3e806a5"},
		{"3e806a5-dirty", "0.0.0~git.3e806a5.dirty"},
		{"dev", "0.0.0~git.dev"},
	}
	args := []string{"-c", script, "bash", repoPath(t, "scripts", "package.sh")}
	for _, c := range cases {
		args = append(args, c[0])
	}
	out, err := exec.Command("bash", args...).Output()
	if err != nil {
		t.Fatalf("pkg_version: %v", err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(cases) {
		t.Fatalf("pkg_version printed %d lines for %d versions: %q", len(got), len(cases), got)
	}
	for i, c := range cases {
		if got[i] != c[1] {
			t.Errorf("pkg_version %s = %q, want %q", c[0], got[i], c[1])
		}
	}
	// Release order: untagged builds, a pre-release, the release, later commits.
	order := []string{"0.0.0~git.3e806a5", "1.3.0~rc.1", "1.3.0", "1.3.0+4.gabc1234"}
	for i := 1; i < len(order); i++ {
		a, b := order[i-1], order[i]
		if _, err := exec.LookPath("dpkg"); err == nil {
			if err := exec.Command("dpkg", "--compare-versions", a, "lt", b).Run(); err != nil {
				t.Errorf("dpkg: %s is not before %s", a, b)
			}
		}
		if _, err := exec.LookPath("rpm"); err == nil {
			out, err := exec.Command("rpm", "--eval", "%{lua:print(rpm.vercmp('"+a+"', '"+b+"'))}").Output()
			if err != nil || strings.TrimSpace(string(out)) != "-1" {
				t.Errorf("rpm: %s is not before %s (vercmp %q, %v)", a, b, out, err)
			}
		}
	}
}
