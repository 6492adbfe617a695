//go:build !unix

package store

import "time"

// processStart is not known here.
func processStart(int) (time.Time, bool) { return time.Time{}, false }

// processAlive cannot tell here: a lease lapses only by its expiry.
func processAlive(int, time.Time) (alive, known bool) { return false, false }
