package binpages

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Release gives back the pages of this process's executable in its
// read-only mappings (code, read-only data): it marks each mapping random
// (MADV_RANDOM), unmaps its pages (MADV_DONTNEED) unless it holds pages of
// the process's own, and drops the executable's pages that no process maps
// from the page cache (fsync, then POSIX_FADV_DONTNEED). See the package doc for why
// and what stays. When the page cache cannot be dropped (the executable
// cannot be opened for reading) the mappings are still released: the
// error says so and the Result says what was done.
func Release() (Result, error) {
	f, err := selfFile()
	if err != nil {
		return Result{}, err
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return Result{}, fmt.Errorf("%w: read /proc/self/smaps: %w", ErrUnsupported, err)
	}
	spans, err := ReadOnlySpans(smaps, f)
	if err != nil {
		return Result{}, fmt.Errorf("read /proc/self/smaps: %w", err)
	}
	var res Result
	var released []Span
	for _, s := range spans {
		if s.AnonymousKiB > 0 {
			// MADV_DONTNEED would throw away what the process wrote.
			res.Skipped++
			continue
		}
		// Random first: a page faulted back is read alone, without the
		// readahead around it, which the fault-around would map too.
		if err := madvise(s, unix.MADV_RANDOM); err != nil {
			return res, fmt.Errorf("madvise(MADV_RANDOM) %#x-%#x: %w", s.Start, s.End, err)
		}
		if err := madvise(s, unix.MADV_DONTNEED); err != nil {
			return res, fmt.Errorf("madvise(MADV_DONTNEED) %#x-%#x: %w", s.Start, s.End, err)
		}
		released = append(released, s)
		res.Spans++
		res.Bytes += s.Len()
	}
	if len(released) == 0 {
		return res, nil
	}
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return res, fmt.Errorf("drop the executable's pages from the page cache: %w", err)
	}
	defer exe.Close()
	// A page the kernel has not written yet stays cached: write them first
	// (nothing to do for an executable installed before it started; one
	// written moments before has some).
	_ = exe.Sync()
	// Twice: the pages this very code faults back between the unmap and
	// the drop come with their cached neighbours (the kernel's fault-around,
	// up to 64 KiB a fault); the second round finds few left to map
	// (TestReleaseReclaimsExecutablePages: 972 KiB of the test binary
	// resident after two rounds, 1,200–1,332 after one).
	for round := range 2 {
		if round > 0 {
			for _, s := range released {
				_ = madvise(s, unix.MADV_DONTNEED) // the first round's call succeeded
			}
		}
		if err := unix.Fadvise(int(exe.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			return res, fmt.Errorf("drop the executable's pages from the page cache: fadvise: %w", err)
		}
	}
	res.CacheDropped = true
	return res, nil
}

func madvise(s Span, advice int) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(s.Start), uintptr(s.Len()), uintptr(advice)); errno != 0 {
		return errno
	}
	return nil
}

// selfFile names the executable as /proc/self/smaps does.
func selfFile() (File, error) {
	fi, err := os.Stat("/proc/self/exe")
	if err != nil {
		return File{}, fmt.Errorf("%w: stat /proc/self/exe: %w", ErrUnsupported, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return File{}, fmt.Errorf("%w: stat /proc/self/exe: no device and inode", ErrUnsupported)
	}
	return File{Major: unix.Major(uint64(st.Dev)), Minor: unix.Minor(uint64(st.Dev)), Inode: st.Ino}, nil
}
