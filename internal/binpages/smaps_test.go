package binpages

import (
	"reflect"
	"strings"
	"testing"
)

// A /proc/self/smaps of a Go binary (device fe:00, inode 10347154), cut to
// a few fields a mapping: its code and read-only data, its data (written),
// an anonymous mapping, the heap, a shared library's relocated read-only
// data and the vDSO.
const sampleSmaps = `00400000-00a2a000 r-xp 00000000 fe:00 10347154                           /usr/local/bin/ax-agent
Size:               6312 kB
Rss:                6116 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
00a2a000-0101b000 r--p 0062a000 fe:00 10347154                           /usr/local/bin/ax-agent
Size:               6084 kB
Rss:                5052 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
0101b000-01067000 rw-p 00c1b000 fe:00 10347154                           /usr/local/bin/ax-agent
Rss:                 304 kB
Anonymous:           172 kB
VmFlags: rd wr mr mw me ac
01067000-010a6000 rw-p 00000000 00:00 0 
Anonymous:           252 kB
02c5e000-02c7f000 rw-p 00000000 00:00 0                                  [heap]
Anonymous:             8 kB
7f1c2a5f0000-7f1c2a5f4000 r--p 001f0000 fe:00 2236                       /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                  16 kB
Anonymous:            16 kB
THPeligible:           0
7ffd6b9f1000-7ffd6b9f3000 r-xp 00000000 00:00 0                          [vdso]
Anonymous:             0 kB
`

func TestReadOnlySpans(t *testing.T) {
	self := File{Major: 0xfe, Minor: 0, Inode: 10347154}
	code := []Span{{Start: 0x400000, End: 0xa2a000}, {Start: 0xa2a000, End: 0x101b000}}
	tests := []struct {
		name  string
		smaps string
		f     File
		want  []Span
	}{
		{"code and read-only data, not data", sampleSmaps, self, code},
		{"relocated read-only data of a library", sampleSmaps, File{Major: 0xfe, Inode: 2236},
			[]Span{{Start: 0x7f1c2a5f0000, End: 0x7f1c2a5f4000, AnonymousKiB: 16}}},
		{"same inode on another device", sampleSmaps, File{Major: 0xfd, Inode: 10347154}, nil},
		{"replaced on disk", strings.ReplaceAll(sampleSmaps, "/usr/local/bin/ax-agent", "/usr/local/bin/ax-agent (deleted)"), self, code},
		{"no final newline", strings.TrimSuffix(sampleSmaps, "\n"), self, code},
		{"write-only counts as writable", "00400000-00401000 -w-p 00000000 fe:00 10347154 /x\nAnonymous: 0 kB\n", self, nil},
		{"empty", "", self, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadOnlySpans([]byte(tc.smaps), tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("spans = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadOnlySpansBadInput(t *testing.T) {
	const head = "00400000-00a2a000 r-xp 00000000 fe:00 10347154 /x\nAnonymous: 0 kB\n"
	tests := []struct {
		name, smaps, want string
	}{
		{"too few fields", head + "00400000-00a2a000 r-xp 00000000 fe:00\n", "smaps line 3: 4 fields"},
		{"no dash", head + "00400000 r-xp 00000000 fe:00 1 /x\n", `smaps line 3: address "00400000": no '-'`},
		{"bad start", head + "0040g000-00a2a000 r-xp 00000000 fe:00 1 /x\n", `smaps line 3: address "0040g000-00a2a000"`},
		{"end before start", head + "00a2a000-00400000 r-xp 00000000 fe:00 1 /x\n", "end not after start"},
		{"short perms", head + "00400000-00a2a000 r-x 00000000 fe:00 1 /x\n", `permissions "r-x"`},
		{"no colon", head + "00400000-00a2a000 r-xp 00000000 fe00 1 /x\n", `device "fe00": no ':'`},
		{"bad minor", head + "00400000-00a2a000 r-xp 00000000 fe:zz 1 /x\n", `device "fe:zz"`},
		{"bad inode", head + "00400000-00a2a000 r-xp 00000000 fe:00 x1 /x\n", `inode "x1"`},
		{"maps, not smaps", "00400000-00a2a000 r-xp 00000000 fe:00 10347154 /x\n00a2a000-0101b000 r--p 0062a000 fe:00 10347154 /x\n",
			"smaps line 2: the mapping before it has no Anonymous field"},
		{"last mapping without Anonymous", head + "00a2a000-0101b000 r--p 0062a000 fe:00 10347154 /x\nRss: 4 kB\n",
			"the last mapping has no Anonymous field"},
		{"Anonymous without unit", "00400000-00a2a000 r-xp 00000000 fe:00 10347154 /x\nAnonymous: 0\n", "smaps line 2: Anonymous: want a size in kB"},
		{"Anonymous not a number", "00400000-00a2a000 r-xp 00000000 fe:00 10347154 /x\nAnonymous: x kB\n", "smaps line 2: Anonymous:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadOnlySpans([]byte(tc.smaps), File{Major: 0xfe, Inode: 10347154})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func FuzzReadOnlySpans(f *testing.F) {
	f.Add([]byte(sampleSmaps), uint32(0xfe), uint32(0), uint64(10347154))
	f.Add([]byte(sampleSmaps), uint32(0xfe), uint32(0), uint64(2236))
	f.Add([]byte("00400000-00401000 r-xp 00000000 08:01 42 /bin/x (deleted)\nAnonymous: 4 kB\n"), uint32(8), uint32(1), uint64(42))
	f.Add([]byte("00400000-00401000 r-xp\n"), uint32(0), uint32(0), uint64(0))
	f.Add([]byte("\n\n  \nRss: 4 kB\n"), uint32(0), uint32(0), uint64(0))
	f.Fuzz(func(t *testing.T, smaps []byte, major, minor uint32, inode uint64) {
		spans, err := ReadOnlySpans(smaps, File{Major: major, Minor: minor, Inode: inode})
		if err != nil {
			if spans != nil {
				t.Fatalf("spans %+v with error %v", spans, err)
			}
			return
		}
		for _, s := range spans {
			if s.End <= s.Start {
				t.Fatalf("span %+v: end not after start", s)
			}
		}
	})
}
