//go:build !unix

package clustertest

import "os"

// lockFile cannot lock across processes here: the reservation holds within
// this process only.
func lockFile(*os.File) bool { return true }
