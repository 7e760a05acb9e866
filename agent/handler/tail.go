package handler

import (
	"errors"
	"io"
	"sync"
)

// DefaultTail is how many bytes of stdout, stderr or a response body are kept.
const DefaultTail = 4 << 10

// copyBufSize is the size of the buffers a tail reads through (ReadFrom).
const copyBufSize = 4 << 10

// copyBufs holds the buffers a handler's tails read through, as
// *[]byte of copyBufSize. Without it io.Copy into a tail makes a 32 KiB
// buffer, zeroed, per call: one per http attempt (even for an empty
// body), two per exec attempt (stdout and stderr, copied by os/exec).
type copyBufs struct{ p sync.Pool }

func (c *copyBufs) get() *[]byte {
	if b, ok := c.p.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, copyBufSize)
	return &b
}

func (c *copyBufs) put(b *[]byte) { c.p.Put(b) }

// tail keeps the last max bytes written to it.
type tail struct {
	mu    sync.Mutex
	max   int
	bufs  *copyBufs
	buf   []byte
	total int64
}

// newTail returns a tail of max bytes that reads through bufs.
func newTail(max int, bufs *copyBufs) *tail { return &tail{max: max, bufs: bufs} }

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return len(p), nil
	}
	if over := len(t.buf) + len(p) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

// ReadFrom reads r to its end (io.ReaderFrom, which io.Copy uses),
// through a buffer of the tail's pool instead of one of its own.
func (t *tail) ReadFrom(r io.Reader) (int64, error) {
	b := t.bufs.get()
	defer t.bufs.put(b)
	var n int64
	for {
		m, err := r.Read(*b)
		if m > 0 {
			_, _ = t.Write((*b)[:m])
			n += int64(m)
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// String returns the tail, prefixed with "…" when bytes were dropped.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.total > int64(len(t.buf)) {
		return "…" + string(t.buf)
	}
	return string(t.buf)
}
