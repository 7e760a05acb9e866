package wheel

import "unsafe"

// entryBytes is the slab memory one entry of w takes.
func entryBytes[T any](w *Wheel[T]) uintptr {
	c := w.slab.chunks[0]
	return (unsafe.Sizeof(*c.v) + unsafe.Sizeof(*c.m)) / chunkSize
}
