// Package binpages lets a long-running binary give back the pages of its
// own executable that only its start-up touched.
//
// A Go binary's code and read-only data are clean file pages mapped from
// the executable. Every page touched since the start stays mapped, and so
// counted in the resident set (VmRSS, RssFile), until the kernel is short
// of memory: package initialisation, parsing the configuration, opening a
// store, the first TLS handshake, each run once, and the neighbours the
// kernel's fault-around mapped beside every fault (16 pages by default).
//
// Worked example, ax-agent idle on linux/amd64 (agent/BENCHMARKS.md): VmRSS
// 14.4 MiB, of which 11.3 MiB were the binary's own file pages and 3.1 MiB
// anonymous; in 30 idle seconds it touched 3.4 MiB of those file pages.
// Three minutes after its start, Release at 15 s, it held 5.5 MiB of them
// (9.0 MiB in all), as root and as a user that does not own the binary
// alike; a copy that did not release held 11.4 MiB (14.7 MiB in all).
//
// Release marks every read-only mapping of the executable random (madvise
// MADV_RANDOM: a page faulted back is read alone, not with the 128 KiB of
// readahead around it), unmaps its pages (MADV_DONTNEED), and then drops
// the executable's pages that no process maps from the page cache
// (posix_fadvise POSIX_FADV_DONTNEED), so that the kernel's fault-around,
// which maps the cached neighbours of a faulting page (64 KiB), finds few
// to map. Both calls need nothing but the mapping and read access to the
// file: they work for a service user that neither owns the executable nor
// may write it, where MADV_PAGEOUT leaves file pages alone, and on any
// kernel. With MADV_PAGEOUT alone, no random advice, the same agent
// settled at 8.0 MiB of file pages instead of 5.4: each fault read 128 KiB
// ahead, and the fault-around mapped it.
//
// What stays: a mapping that holds pages of the process's own (smaps'
// Anonymous: relocated read-only data of a position-independent binary)
// is left alone, because MADV_DONTNEED would throw those pages away (a
// position-independent build of this package's tests crashes without that
// check: TestReleaseInPositionIndependentBinary); a page another process
// maps stays cached (a second agent of the same binary). A page the
// process needs again is read back from the file, one page per fault: a
// one-off cost of about the working set, paid as the process touches it
// (here the 5.5 MiB it settles at: about 1,400 reads of 4 KiB). Writable
// mappings are never touched.
//
// Concurrency and scope: Release is safe to call from any goroutine at any
// time, but it acts on the whole process, so only a program's main package
// should call it (a library embedded in another program must not). On a
// system without /proc it returns an error wrapping ErrUnsupported and
// changes nothing.
package binpages
