package snapshot

import (
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// BenchmarkSnapshotSeal measures a whole seal — write, fsync, manifest,
// re-read verify, publish — for 1 MiB and 64 MiB artifacts (sub-benchmark
// "seal"), and the gate's re-read verification alone on the same artifact
// ("gate"), so the gate's share of the seal is visible. Run it alone:
//
//	go test -run '^$' -bench SnapshotSeal -benchtime 5x ./snapshot/
func BenchmarkSnapshotSeal(b *testing.B) {
	for _, size := range []int{1 << 20, 64 << 20} {
		data := payload(size, 9)
		b.Run(fmt.Sprintf("size=%dMiB/seal", size>>20), func(b *testing.B) {
			s := benchStore(b)
			b.SetBytes(int64(size))
			var index uint64
			for b.Loop() {
				index++
				benchPut(b, s, index, data)
			}
		})
		b.Run(fmt.Sprintf("size=%dMiB/gate", size>>20), func(b *testing.B) {
			s := benchStore(b)
			id := benchPut(b, s, 1, data)
			dir := filepath.Join(s.Dir(), id)
			m, err := readManifest(OSFS{}, dir, id)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			for b.Loop() {
				if g := s.gate(m, dir); g != nil {
					b.Fatal(g)
				}
			}
		})
	}
}

func benchStore(b *testing.B) *Store {
	s, err := Open(filepath.Join(b.TempDir(), "snapshots"), WithRetain(1), WithLogger(hclog.NewNullLogger()))
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func benchPut(b *testing.B, s *Store, index uint64, data []byte) string {
	sk, err := s.Create(1, index, 1, testConfiguration(), 1, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sk.Write(data); err != nil {
		b.Fatal(err)
	}
	if err := sk.Close(); err != nil {
		b.Fatal(err)
	}
	return sk.ID()
}

// BenchmarkOpenFirstByte measures what a leader's install waits for
// before its first byte goes out: Store.Open and the first 64 KiB read, on
// a 256 MiB artifact in the page cache. Run it alone:
//
//	go test -run '^$' -bench OpenFirstByte -benchtime 20x ./snapshot/
func BenchmarkOpenFirstByte(b *testing.B) {
	s := benchStore(b)
	id := benchPut(b, s, 1, payload(256<<20, 7))
	buf := make([]byte, 64<<10)
	for b.Loop() {
		_, rc, err := s.Open(id)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(rc, buf); err != nil {
			b.Fatal(err)
		}
		rc.Close()
	}
}
