package clustertest

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

	"github.com/jobraft/jobraft/raft"
)

// KV is a deterministic key-value raft.StateMachine. A command is
// "key=value"; Apply returns the previous value. A command without '=' is
// rejected with the result "!bad" and changes nothing. KV counts the writes
// of every key (part of its snapshot and digest), so a test that proposes
// each key once can check that every command was applied exactly once.
type KV struct {
	mu      sync.RWMutex
	m       map[string]string
	writes  map[string]int
	applied uint64
}

var _ raft.StateMachine = (*KV)(nil)

// NewKV returns an empty KV.
func NewKV() *KV { return &KV{m: map[string]string{}, writes: map[string]int{}} }

// Apply implements raft.StateMachine.
func (kv *KV) Apply(e raft.Entry) []byte {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.applied = e.Index
	k, v, ok := bytes.Cut(e.Cmd, []byte("="))
	if !ok {
		return []byte("!bad")
	}
	prev := kv.m[string(k)]
	kv.m[string(k)] = string(v)
	kv.writes[string(k)]++
	return []byte(prev)
}

// Writes returns how many applied commands wrote k.
func (kv *KV) Writes(k string) int {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	return kv.writes[k]
}

// Entry is one key's value and write count.
type Entry struct {
	Value  string `json:"v"`
	Writes int    `json:"n"`
}

// Dump returns a copy of every key with its value and write count.
func (kv *KV) Dump() map[string]Entry {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	out := make(map[string]Entry, len(kv.m))
	for k, v := range kv.m {
		out[k] = Entry{Value: v, Writes: kv.writes[k]}
	}
	return out
}

// Applied returns the index of the last command applied.
func (kv *KV) Applied() uint64 {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	return kv.applied
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
	writes  map[string]int
	applied uint64
}

// Snapshot implements raft.StateMachine (a copy: the map is small in tests).
func (kv *KV) Snapshot() (raft.Snapshot, error) {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	c := make(map[string]string, len(kv.m))
	w := make(map[string]int, len(kv.m))
	for k, v := range kv.m {
		c[k], w[k] = v, kv.writes[k]
	}
	return &kvSnap{m: c, writes: w, applied: kv.applied}, nil
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
		binary.Write(bw, binary.LittleEndian, uint32(s.writes[k]))
	}
	return bw.Flush()
}

func (s *kvSnap) Release() {}

// Restore implements raft.StateMachine.
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
	w := make(map[string]int, n)
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
		var c uint32
		if err := binary.Read(br, binary.LittleEndian, &c); err != nil {
			return err
		}
		m[kvp[0]], w[kvp[0]] = kvp[1], int(c)
	}
	kv.mu.Lock()
	kv.m, kv.writes, kv.applied = m, w, applied
	kv.mu.Unlock()
	return nil
}

// Digest implements raft.StateMachine.
func (kv *KV) Digest() raft.Digest {
	kv.mu.RLock()
	defer kv.mu.RUnlock()
	h := sha256.New()
	for _, k := range sortedKeys(kv.m) {
		fmt.Fprintf(h, "%d:%s=%d:%s#%d;", len(k), k, len(kv.m[k]), kv.m[k], kv.writes[k])
	}
	var d raft.Digest
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
