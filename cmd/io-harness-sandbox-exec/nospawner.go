//go:build !(linux && cgo)

package main

// cgoSpawner reports whether this build carries the spawner.
const cgoSpawner = false
