package chaos

import (
	"fmt"
	"testing"
)

func TestZZList(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		s := Generate(seed, GenOptions{})
		fmt.Print(s)
	}
}
