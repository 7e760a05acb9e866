package binpages

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// residentKiB sums Rss over the smaps entries of spans.
func residentKiB(t *testing.T, spans []Span) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	want := map[uint64]bool{}
	for _, s := range spans {
		want[s.Start] = true
	}
	var total int
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if start, _, ok := strings.Cut(fields[0], "-"); ok && len(fields) >= 5 {
			a, err := strconv.ParseUint(start, 16, 64)
			in = err == nil && want[a]
			continue
		}
		if in && fields[0] == "Rss:" {
			kib, err := strconv.Atoi(fields[1])
			if err != nil {
				t.Fatalf("smaps %q: %v", line, err)
			}
			total += kib
		}
	}
	return total
}

func TestReleaseReclaimsExecutablePages(t *testing.T) {
	f, err := selfFile()
	if err != nil {
		t.Skip(err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	spans, err := ReadOnlySpans(smaps, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) == 0 {
		t.Fatalf("no read-only mapping of the test binary in /proc/self/smaps")
	}
	// go test wrote this binary moments ago: its pages may still be dirty,
	// and the page cache keeps a dirty page until it is written.
	if exe, err := os.Open("/proc/self/exe"); err == nil {
		_ = exe.Sync()
		_ = exe.Close()
	}
	before := residentKiB(t, spans)
	res, err := Release()
	if err != nil {
		t.Fatalf("Release: %v (%+v)", err, res)
	}
	after := residentKiB(t, spans)
	t.Logf("read-only mappings of the test binary: %d KiB resident before, %d KiB after (%+v)", before, after, res)
	if res.Spans+res.Skipped != len(spans) || res.Spans == 0 || !res.CacheDropped {
		t.Errorf("result %+v, want the %d read-only mappings released and the page cache dropped", res, len(spans))
	}
	if after*2 > before {
		t.Errorf("resident %d KiB after Release, want under half of the %d KiB before", after, before)
	}
}

// TestReleaseInPositionIndependentBinary runs the test above in a
// position-independent build of this package's tests, whose relocated
// read-only data is a mapping of the executable with pages of the
// process's own: Release must leave that mapping alone (MADV_DONTNEED would
// give back the pages as the file has them, unrelocated) and release the
// others.
func TestReleaseInPositionIndependentBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package's tests again")
	}
	bin := filepath.Join(t.TempDir(), "binpages-pie.test")
	build := exec.Command("go", "test", "-c", "-buildmode=pie", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Skipf("no position-independent build here: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "-test.run", "^TestReleaseReclaimsExecutablePages$", "-test.v").CombinedOutput()
	if err != nil {
		t.Fatalf("position-independent test binary: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Skipped:(\d+)`).FindSubmatch(out)
	if m == nil || string(m[1]) == "0" {
		t.Fatalf("no mapping with pages of the process's own skipped:\n%s", out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}
