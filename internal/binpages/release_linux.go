package binpages

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Release asks the kernel to reclaim the pages of this process's
// executable in its read-only mappings (code, read-only data) and to read
// them back one at a time when touched again; see the package doc for what
// stays. It returns what it advised.
func Release() (Result, error) {
	f, err := selfFile()
	if err != nil {
		return Result{}, err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return Result{}, fmt.Errorf("%w: read /proc/self/maps: %w", ErrUnsupported, err)
	}
	spans, err := ReadOnlySpans(maps, f)
	if err != nil {
		return Result{}, fmt.Errorf("read /proc/self/maps: %w", err)
	}
	var res Result
	for _, s := range spans {
		// Random first: a page faulted back is read alone, without the
		// readahead around it, which the fault-around would map too.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(s.Start), uintptr(s.Len()), unix.MADV_RANDOM); errno != 0 {
			return res, fmt.Errorf("madvise(MADV_RANDOM) %#x-%#x: %w", s.Start, s.End, errno)
		}
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(s.Start), uintptr(s.Len()), unix.MADV_PAGEOUT); errno != 0 {
			if errno == unix.EINVAL && res.Spans == 0 {
				// An older kernel: leave the mapping as it was.
				_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(s.Start), uintptr(s.Len()), unix.MADV_NORMAL)
				return res, fmt.Errorf("%w: madvise(MADV_PAGEOUT): %w (Linux 5.4 or later has it)", ErrUnsupported, errno)
			}
			return res, fmt.Errorf("madvise(MADV_PAGEOUT) %#x-%#x: %w", s.Start, s.End, errno)
		}
		res.Spans++
		res.Bytes += s.Len()
	}
	return res, nil
}

// selfFile names the executable as /proc/self/maps does.
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
