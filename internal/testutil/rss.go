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

// ClearRefs clears the referenced bits of all of pid's pages by writing "1"
// to /proc/PID/clear_refs, so that a later ProcReferenced counts only the
// pages the process touches from now on. The caller needs the right to
// trace pid (its own children qualify).
func ClearRefs(pid int) error {
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("1"), 0); err != nil {
		return fmt.Errorf("clear refs of %d: %w", pid, err)
	}
	return nil
}

// ProcReferenced sums the Referenced field of pid's /proc smaps, in KiB: the
// pages touched since the last ClearRefs (or since they were mapped). "file"
// holds the mappings of a file (the binary's code and data, shared
// libraries, SQLite's shared memory), "anon" the rest (heap, stacks). With
// ClearRefs before a quiet window it is the working set of that window, as
// against RSS, which also counts the pages touched before the window and
// those the kernel mapped in beside a fault, until it reclaims them.
func ProcReferenced(pid int) (map[string]int, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/smaps")
	if err != nil {
		return nil, fmt.Errorf("referenced of %d: %w", pid, err)
	}
	defer f.Close()
	got := map[string]int{"file": 0, "anon": 0}
	kind := "anon"
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if fields := strings.Fields(line); len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			// A mapping's header: range perms offset dev inode [path].
			kind = "anon"
			if len(fields) >= 6 && strings.HasPrefix(fields[5], "/") {
				kind = "file"
			}
			continue
		}
		v, ok := strings.CutPrefix(line, "Referenced:")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		if err != nil {
			return nil, fmt.Errorf("referenced of %d: %q: %w", pid, line, err)
		}
		got[kind] += n
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("referenced of %d: %w", pid, err)
	}
	return got, nil
}
