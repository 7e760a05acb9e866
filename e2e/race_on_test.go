//go:build race

package e2e

// raceDetector is true when the tests are built with -race.
const raceDetector = true
