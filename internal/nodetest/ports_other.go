//go:build !unix

package nodetest

import "os"

// lockFile cannot lock across processes here: the reservation holds within
// this process only.
func lockFile(*os.File) bool { return true }
