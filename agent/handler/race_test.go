//go:build race

package handler

// raceDetector is true in a -race build, where sync.Pool drops some of
// what is put back, so pooled buffers (net/http's own too) are made anew.
const raceDetector = true
