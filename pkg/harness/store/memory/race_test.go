//go:build race

package memory

// race is set when the race detector is on: SQLite under it is some
// fifteen times slower, and TestSameAsSQLite, which runs on one goroutine,
// plays fewer scripts.
const race = true
