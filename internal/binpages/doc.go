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
// Two minutes after Release it held 5.3 MiB of them (8.7 MiB in all), and
// a copy of it that did not release still held 11.3 MiB.
//
// Release first marks every read-only mapping of the executable random
// (madvise MADV_RANDOM: a page faulted back is read alone, not with the
// 128 KiB of readahead around it, which the kernel's fault-around would map
// as well; without it the same agent settled at 8.0 MiB of file pages),
// then asks the kernel to reclaim its pages (MADV_PAGEOUT, Linux 5.4 and
// later). The kernel reclaims only what it can: a page another process
// also maps stays, and so does a page this process wrote (private copies,
// such as relocated read-only data of a position-independent binary). A
// page the process needs again is read back from the file, one page per
// fault: a one-off cost of about the working set, paid as the process
// touches it (here about 1,400 reads of 4 KiB). Writable mappings are
// never touched.
//
// Concurrency and scope: Release is safe to call from any goroutine at any
// time, but it acts on the whole process, so only a program's main package
// should call it (a library embedded in another program must not). On a
// system without /proc or without MADV_PAGEOUT it returns an error
// wrapping ErrUnsupported and changes nothing.
package binpages
