package testutil

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcRSS reads the resident-memory fields of pid's /proc status, in KiB:
// VmRSS and its parts RssAnon (heap, stacks, memory outside Go such as
// SQLite's) and RssFile (the binary's mapped code and data). It fails
// where /proc has no such status (not Linux) or it holds no VmRSS.
func ProcRSS(pid int) (map[string]int, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, fmt.Errorf("rss of %d: %w", pid, err)
	}
	defer f.Close()
	got := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "RssAnon" && k != "RssFile") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		if err != nil {
			return nil, fmt.Errorf("rss of %d: %s: %w", pid, k, err)
		}
		got[k] = n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("rss of %d: %w", pid, err)
	}
	if _, ok := got["VmRSS"]; !ok {
		return nil, fmt.Errorf("rss of %d: no VmRSS in its /proc status", pid)
	}
	return got, nil
}
