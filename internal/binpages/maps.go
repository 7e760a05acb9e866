package binpages

import (
	"bytes"
	"fmt"
	"strconv"
)

// Span is one mapping of the executable: [Start, End).
type Span struct {
	Start, End uint64
}

// Len is the span's length in bytes.
func (s Span) Len() uint64 { return s.End - s.Start }

// File names a mapped file as /proc/<pid>/maps does: the device's major
// and minor numbers and the inode.
type File struct {
	Major, Minor uint32
	Inode        uint64
}

// ReadOnlySpans returns the mappings of f in maps (the text of
// /proc/<pid>/maps) that are not writable, in the order listed. A line it
// cannot read is an error naming the line; lines of other files are
// skipped. Matching by device and inode, not by path, also finds the
// mappings of an executable replaced on disk since it started (its path
// then ends in " (deleted)").
func ReadOnlySpans(maps []byte, f File) ([]Span, error) {
	var out []Span
	for n := 1; len(maps) > 0; n++ {
		line := maps
		if i := bytes.IndexByte(maps, '\n'); i >= 0 {
			line, maps = maps[:i], maps[i+1:]
		} else {
			maps = nil
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("maps line %d: %w", n, err)
		}
		if m.file != f || m.writable {
			continue
		}
		out = append(out, m.span)
	}
	return out, nil
}

// mapping is one line of /proc/<pid>/maps:
// "start-end perms offset major:minor inode [path]".
type mapping struct {
	span     Span
	writable bool
	file     File
}

func parseLine(line []byte) (mapping, error) {
	fields := bytes.Fields(line)
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
