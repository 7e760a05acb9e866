package ops

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
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

// AgentSizeBudget is the budget of docs/architecture.md (Budgets): the stripped linux/arm64 agent binary.
const AgentSizeBudget = 12 << 20

// TestCrossBuildAgent runs scripts/cross-build.sh for ax-agent on
// linux/arm64 and linux/arm (GOARM=7) — plus the host platform, so the
// stamped version can be run — into t.TempDir(). It checks that the
// binaries are for the right machine, static, stripped, version-stamped and
// listed in SHA256SUMS, and that the arm64 agent is within its 12 MiB budget.
func TestCrossBuildAgent(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	dist := t.TempDir()
	targets := map[string]elf.Machine{"linux/arm64": elf.EM_AARCH64, "linux/arm/7": elf.EM_ARM}
	host := ""
	if runtime.GOOS == "linux" {
		host = "linux/" + runtime.GOARCH
		if runtime.GOARCH == "arm" {
			host = "linux/arm/7"
		}
		if _, ok := targets[host]; !ok && runtime.GOARCH == "amd64" {
			targets[host] = elf.EM_X86_64
		}
	}
	var list []string
	for tg := range targets {
		list = append(list, tg)
	}
	version := fmt.Sprintf("opscheck-%d", time.Now().UnixNano())
	const commit, date = "0pscheck", "2026-01-02T03:04:05Z"

	cmd := exec.Command("bash", repoPath(t, "scripts", "cross-build.sh"))
	cmd.Env = append(os.Environ(), "DIST="+dist, "TARGETS="+strings.Join(list, " "), "BINARIES=ax-agent",
		"VERSION="+version, "COMMIT="+commit, "DATE="+date)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cross-build.sh: %v\n%s", err, out)
	}
	t.Logf("cross-build.sh:\n%s", out)

	sums := readSums(t, filepath.Join(dist, "SHA256SUMS"))
	if len(sums) != len(targets) {
		t.Errorf("SHA256SUMS lists %d files, want %d", len(sums), len(targets))
	}
	for tg, machine := range targets {
		name := "ax-agent-" + distSuffix(tg)
		path := filepath.Join(dist, name)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v", tg, err)
			continue
		}
		h := sha256.Sum256(b)
		if sums[name] != hex.EncodeToString(h[:]) {
			t.Errorf("%s: SHA256SUMS has %q, file hashes to %x", name, sums[name], h)
		}
		checkELF(t, path, machine)
		if !bytes.Contains(b, []byte(version)) || !bytes.Contains(b, []byte(date)) {
			t.Errorf("%s: version %q or date %q not stamped into the binary", name, version, date)
		}
		if tg == "linux/arm64" {
			t.Logf("ax-agent linux/arm64: %d bytes (%.2f MiB), budget %d (12 MiB)", len(b), float64(len(b))/(1<<20), AgentSizeBudget)
			if len(b) > AgentSizeBudget {
				t.Errorf("ax-agent linux/arm64 is %d bytes (%.2f MiB), over the 12 MiB budget (docs/architecture.md: Budgets) by %d bytes",
					len(b), float64(len(b))/(1<<20), len(b)-AgentSizeBudget)
			}
		}
	}
	if host != "" {
		got, err := exec.Command(filepath.Join(dist, "ax-agent-"+distSuffix(host)), "version").CombinedOutput()
		if err != nil {
			t.Fatalf("ax-agent version: %v\n%s", err, got)
		}
		want := fmt.Sprintf("ax-agent %s (commit %s, built %s)", version, commit, date)
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("ax-agent version = %q, want %q", strings.TrimSpace(string(got)), want)
		}
	}
}

// distSuffix is the file suffix cross-build.sh uses for a target.
func distSuffix(target string) string {
	parts := strings.Split(target, "/")
	s := parts[0] + "-" + parts[1]
	if parts[1] == "arm" {
		s += "v" + parts[2]
	}
	return s
}

func readSums(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("%s: bad line %q", path, sc.Text())
		}
		sums[name] = sum
	}
	return sums
}

// checkELF: the right machine, statically linked (no interpreter, no
// dynamic section) and stripped (no symbol table).
func checkELF(t *testing.T, path string, machine elf.Machine) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	defer f.Close()
	if f.Machine != machine {
		t.Errorf("%s: machine %v, want %v", path, f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: has %v: not statically linked", path, p.Type)
		}
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s: has .symtab: not stripped", path)
	}
	if f.Section(".debug_info") != nil || f.Section(".zdebug_info") != nil {
		t.Errorf("%s: has DWARF: not stripped", path)
	}
}
