//go:build !unix

package main

// lockDataDir does not lock on this platform: a second daemon on the same
// data dir is refused by the stable store's own lock instead (with a
// timeout).
func lockDataDir(string) (func(), error) { return func() {}, nil }
