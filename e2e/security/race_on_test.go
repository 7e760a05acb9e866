//go:build race

package security

// raceDetector is true when the tests are built with -race.
const raceDetector = true
