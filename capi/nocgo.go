//go:build !cgo

// Without cgo there is no C ABI to build; this file keeps
// "CGO_ENABLED=0 go build ./..." and "go vet ./..." working.
package main

func main() {}
