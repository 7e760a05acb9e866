package binpages

import (
	"reflect"
	"strings"
	"testing"
)

// A /proc/self/maps of a Go binary (device fe:00, inode 10347154) with its
// data, heap, an anonymous mapping, a shared library and the vDSO.
const sampleMaps = `00400000-00a2a000 r-xp 00000000 fe:00 10347154                           /usr/local/bin/ax-agent
00a2a000-0101b000 r--p 0062a000 fe:00 10347154                           /usr/local/bin/ax-agent
0101b000-01067000 rw-p 00c1b000 fe:00 10347154                           /usr/local/bin/ax-agent
01067000-010a6000 rw-p 00000000 00:00 0 
02c5e000-02c7f000 rw-p 00000000 00:00 0                                  [heap]
c000000000-c000400000 rw-p 00000000 00:00 0 
7f1c2a400000-7f1c2a428000 r--p 00000000 fe:00 2236                       /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd6b9f1000-7ffd6b9f3000 r-xp 00000000 00:00 0                          [vdso]
`

func TestReadOnlySpans(t *testing.T) {
	self := File{Major: 0xfe, Minor: 0, Inode: 10347154}
	tests := []struct {
		name string
		maps string
		f    File
		want []Span
	}{
		{"code and read-only data, not data", sampleMaps, self,
			[]Span{{0x400000, 0xa2a000}, {0xa2a000, 0x101b000}}},
		{"another file", sampleMaps, File{Major: 0xfe, Inode: 2236}, []Span{{0x7f1c2a400000, 0x7f1c2a428000}}},
		{"same inode on another device", sampleMaps, File{Major: 0xfd, Inode: 10347154}, nil},
		{"replaced on disk", strings.ReplaceAll(sampleMaps, "/usr/local/bin/ax-agent", "/usr/local/bin/ax-agent (deleted)"), self,
			[]Span{{0x400000, 0xa2a000}, {0xa2a000, 0x101b000}}},
		{"no final newline", strings.TrimSuffix(sampleMaps, "\n"), self,
			[]Span{{0x400000, 0xa2a000}, {0xa2a000, 0x101b000}}},
		{"write-only counts as writable", "00400000-00401000 -w-p 00000000 fe:00 10347154 /x\n", self, nil},
		{"empty", "", self, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadOnlySpans([]byte(tc.maps), tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("spans = %x, want %x", got, tc.want)
			}
		})
	}
}

func TestReadOnlySpansBadLine(t *testing.T) {
	tests := []struct {
		name, line, want string
	}{
		{"too few fields", "00400000-00a2a000 r-xp 00000000 fe:00", "maps line 2: 4 fields"},
		{"no dash", "00400000 r-xp 00000000 fe:00 1 /x", `maps line 2: address "00400000": no '-'`},
		{"bad start", "0040g000-00a2a000 r-xp 00000000 fe:00 1 /x", `maps line 2: address "0040g000-00a2a000"`},
		{"end before start", "00a2a000-00400000 r-xp 00000000 fe:00 1 /x", "end not after start"},
		{"short perms", "00400000-00a2a000 r-x 00000000 fe:00 1 /x", `permissions "r-x"`},
		{"no colon", "00400000-00a2a000 r-xp 00000000 fe00 1 /x", `device "fe00": no ':'`},
		{"bad minor", "00400000-00a2a000 r-xp 00000000 fe:zz 1 /x", `device "fe:zz"`},
		{"bad inode", "00400000-00a2a000 r-xp 00000000 fe:00 x1 /x", `inode "x1"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			maps := "00400000-00a2a000 r-xp 00000000 fe:00 10347154 /x\n" + tc.line + "\n"
			_, err := ReadOnlySpans([]byte(maps), File{Major: 0xfe, Inode: 10347154})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func FuzzReadOnlySpans(f *testing.F) {
	f.Add([]byte(sampleMaps), uint32(0xfe), uint32(0), uint64(10347154))
	f.Add([]byte("00400000-00401000 r-xp 00000000 08:01 42 /bin/x (deleted)\n"), uint32(8), uint32(1), uint64(42))
	f.Add([]byte("00400000-00401000 r-xp\n"), uint32(0), uint32(0), uint64(0))
	f.Add([]byte("\n\n  \n"), uint32(0), uint32(0), uint64(0))
	f.Fuzz(func(t *testing.T, maps []byte, major, minor uint32, inode uint64) {
		spans, err := ReadOnlySpans(maps, File{Major: major, Minor: minor, Inode: inode})
		if err != nil {
			if spans != nil {
				t.Fatalf("spans %x with error %v", spans, err)
			}
			return
		}
		for _, s := range spans {
			if s.End <= s.Start {
				t.Fatalf("span %x: end not after start", s)
			}
		}
	})
}
