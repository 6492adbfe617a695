//go:build !race

package wasi

// raceEnabled: the race detector's shadow memory counts in the resident
// size the RSS tests measure.
const raceEnabled = false
