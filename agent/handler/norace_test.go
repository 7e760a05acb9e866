//go:build !race

package handler

// raceDetector is true in a -race build (race_test.go).
const raceDetector = false
