//go:build linux && cgo

package main

// The constructor in helper.c takes over before the Go runtime starts
// when the helper is run by package sandbox; the spawner it calls is
// linked in through the import below.

// #include <stdlib.h>
import "C"

import _ "github.com/initorigin/io-harness-go/pkg/sandbox"

// cgoSpawner reports whether this build carries the spawner.
const cgoSpawner = true
