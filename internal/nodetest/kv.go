// Package nodetest holds test helpers for packages that run raft.Node
// clusters: a small key-value state machine and a loopback cluster.
package nodetest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/jobraft/jobraft/fsm"
)

// KV is a deterministic key-value fsm.StateMachine. A command is
// "key=value"; Apply returns the previous value. A command without '=' is
// rejected with the result "!bad" and changes nothing.
type KV struct {
	mu      sync.RWMutex
	m       map[string]string
	applied uint64
}

var _ fsm.StateMachine = (*KV)(nil)

// NewKV returns an empty KV.
func NewKV() *KV { return &KV{m: map[string]string{}} }

// Apply implements fsm.StateMachine.
func (kv *KV) Apply(e fsm.Entry) []byte {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.applied = e.Index
	k, v, ok := bytes.Cut(e.Cmd, []byte("="))
	if !ok {
		return []byte("!bad")
	}
	prev := kv.m[string(k)]
	kv.m[string(k)] = string(v)
	return []byte(prev)
}

// Get returns the value of k.
func (kv *KV) Get(k string) (string, bool) {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	v, ok := kv.m[k]
	return v, ok
}

// Len returns the number of keys.
func (kv *KV) Len() int {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	return len(kv.m)
}

type kvSnap struct {
	m       map[string]string
	applied uint64
}

// Snapshot implements fsm.StateMachine (a copy: the map is small in tests).
func (kv *KV) Snapshot() (fsm.Snapshot, error) {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	c := make(map[string]string, len(kv.m))
	for k, v := range kv.m {
		c[k] = v
	}
	return &kvSnap{m: c, applied: kv.applied}, nil
}

func (s *kvSnap) Persist(w io.Writer) error {
	bw := bufio.NewWriter(w)
	binary.Write(bw, binary.LittleEndian, s.applied)
	binary.Write(bw, binary.LittleEndian, uint64(len(s.m)))
	for _, k := range sortedKeys(s.m) {
		for _, b := range []string{k, s.m[k]} {
			binary.Write(bw, binary.LittleEndian, uint32(len(b)))
			bw.WriteString(b)
		}
	}
	return bw.Flush()
}

func (s *kvSnap) Release() {}

// Restore implements fsm.StateMachine.
func (kv *KV) Restore(r io.Reader) error {
	br := bufio.NewReader(r)
	var applied, n uint64
	if err := binary.Read(br, binary.LittleEndian, &applied); err != nil {
		return err
	}
	if err := binary.Read(br, binary.LittleEndian, &n); err != nil {
		return err
	}
	if n > 1<<24 {
		return errors.New("kv: snapshot too large")
	}
	m := make(map[string]string, n)
	for i := uint64(0); i < n; i++ {
		var kvp [2]string
		for j := range kvp {
			var l uint32
			if err := binary.Read(br, binary.LittleEndian, &l); err != nil {
				return err
			}
			if l > 1<<20 {
				return fmt.Errorf("kv: string of %d bytes", l)
			}
			b := make([]byte, l)
			if _, err := io.ReadFull(br, b); err != nil {
				return err
			}
			kvp[j] = string(b)
		}
		m[kvp[0]] = kvp[1]
	}
	kv.mu.Lock()
	kv.m, kv.applied = m, applied
	kv.mu.Unlock()
	return nil
}

// Digest implements fsm.StateMachine.
func (kv *KV) Digest() fsm.Digest {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	h := sha256.New()
	for _, k := range sortedKeys(kv.m) {
		fmt.Fprintf(h, "%d:%s=%d:%s;", len(k), k, len(kv.m[k]), kv.m[k])
	}
	var d fsm.Digest
	d.Index = kv.applied
	copy(d.Sum[:], h.Sum(nil))
	return d
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
