package binpages

import (
	"bytes"
	"fmt"
	"strconv"
)

// Span is one mapping of the executable: [Start, End), and how much of it
// is this process's own private copy (smaps' Anonymous, KiB: pages written
// since they were mapped, such as relocated read-only data).
type Span struct {
	Start, End   uint64
	AnonymousKiB uint64
}

// Len is the span's length in bytes.
func (s Span) Len() uint64 { return s.End - s.Start }

// File names a mapped file as /proc/<pid>/smaps does: the device's major
// and minor numbers and the inode.
type File struct {
	Major, Minor uint32
	Inode        uint64
}

// ReadOnlySpans returns the mappings of f in smaps (the text of
// /proc/<pid>/smaps) that are not writable, in the order listed, each with
// its Anonymous field. A line it cannot read is an error naming the line,
// and so is a mapping of f without an Anonymous field (maps, not smaps,
// given); mappings of other files are skipped. Matching by device and
// inode, not by path, also finds the mappings of an executable replaced
// on disk since it started (its path then ends in " (deleted)").
func ReadOnlySpans(smaps []byte, f File) ([]Span, error) {
	var out []Span
	cur := -1 // index in out of the mapping whose fields follow, or -1
	anonSeen := true
	for n := 1; len(smaps) > 0; n++ {
		line := smaps
		if i := bytes.IndexByte(smaps, '\n'); i >= 0 {
			line, smaps = smaps[:i], smaps[i+1:]
		} else {
			smaps = nil
		}
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if key, ok := bytes.CutSuffix(fields[0], []byte(":")); ok && !bytes.ContainsRune(key, '-') {
			// A field of the mapping above ("Rss: 4 kB", "VmFlags: rd ex").
			if cur < 0 || !bytes.Equal(key, []byte("Anonymous")) {
				continue
			}
			if len(fields) != 3 || !bytes.Equal(fields[2], []byte("kB")) {
				return nil, fmt.Errorf("smaps line %d: Anonymous: want a size in kB", n)
			}
			kib, err := strconv.ParseUint(string(fields[1]), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("smaps line %d: Anonymous: %w", n, err)
			}
			out[cur].AnonymousKiB, anonSeen = kib, true
			continue
		}
		if !anonSeen {
			return nil, fmt.Errorf("smaps line %d: the mapping before it has no Anonymous field", n)
		}
		m, err := parseHeader(fields)
		if err != nil {
			return nil, fmt.Errorf("smaps line %d: %w", n, err)
		}
		cur = -1
		if m.file != f || m.writable {
			continue
		}
		out = append(out, m.span)
		cur, anonSeen = len(out)-1, false
	}
	if !anonSeen {
		return nil, fmt.Errorf("smaps: the last mapping has no Anonymous field")
	}
	return out, nil
}

// mapping is one header line of /proc/<pid>/smaps, as a line of maps:
// "start-end perms offset major:minor inode [path]".
type mapping struct {
	span     Span
	writable bool
	file     File
}

func parseHeader(fields [][]byte) (mapping, error) {
	if len(fields) < 5 {
		return mapping{}, fmt.Errorf("%d fields, want at least 5", len(fields))
	}
	var m mapping
	start, end, ok := bytes.Cut(fields[0], []byte("-"))
	if !ok {
		return mapping{}, fmt.Errorf("address %q: no '-'", fields[0])
	}
	var err error
	if m.span.Start, err = strconv.ParseUint(string(start), 16, 64); err != nil {
		return mapping{}, fmt.Errorf("address %q: %w", fields[0], err)
	}
	if m.span.End, err = strconv.ParseUint(string(end), 16, 64); err != nil {
		return mapping{}, fmt.Errorf("address %q: %w", fields[0], err)
	}
	if m.span.End <= m.span.Start {
		return mapping{}, fmt.Errorf("address %q: end not after start", fields[0])
	}
	if len(fields[1]) != 4 {
		return mapping{}, fmt.Errorf("permissions %q: want 4 characters", fields[1])
	}
	m.writable = fields[1][1] != '-'
	major, minor, ok := bytes.Cut(fields[3], []byte(":"))
	if !ok {
		return mapping{}, fmt.Errorf("device %q: no ':'", fields[3])
	}
	maj, err := strconv.ParseUint(string(major), 16, 32)
	if err != nil {
		return mapping{}, fmt.Errorf("device %q: %w", fields[3], err)
	}
	mnr, err := strconv.ParseUint(string(minor), 16, 32)
	if err != nil {
		return mapping{}, fmt.Errorf("device %q: %w", fields[3], err)
	}
	m.file.Major, m.file.Minor = uint32(maj), uint32(mnr)
	if m.file.Inode, err = strconv.ParseUint(string(fields[4]), 10, 64); err != nil {
		return mapping{}, fmt.Errorf("inode %q: %w", fields[4], err)
	}
	return m, nil
}
