package fsm

import (
	"encoding/binary"
	"hash/maphash"
	"io"
)

// SnapshotInfo is what VerifySnapshot found in a stream that Restore
// would accept: Restore then reports the same index, job count and digest
// (Jobs.Digest().Sum).
type SnapshotInfo struct {
	Version uint16
	Index   uint64
	Jobs    int
	Digest  [32]byte
}

// VerifySnapshot checks a whole snapshot stream as Restore does, with the
// same verdict on every input (ErrCorruptSnapshot, ErrSnapshotVersion or
// the reader's own error), without keeping the jobs: memory does not grow
// with them.
//
// Every rule of one record alone, the layout, order, end count, checksum
// and state digest are checked by the code Restore runs. The rules between
// job records need more than the last record:
//
//   - an idempotency key, a held unique key and a queue index key are
//     each held by one job only: their fingerprints go into a Bloom filter
//     of size/8 bytes (size: the stream's length, or an estimate; at
//     least 4 KiB, at most 16 MiB: 64 bits a job up to 2 million jobs, a
//     job record being at least 64 bytes), and a fingerprint met before
//     (a true duplicate, or a false positive) is kept exactly as a
//     suspect;
//   - a waiting job's unmet parents are held and not ended: a parent of a
//     greater ID is kept until its record passes, one of a smaller ID
//     until the second read (at most MaxParents per waiting job).
//
// When suspects or parents of smaller IDs remain after the first read,
// the stream is read a second time (reread, which must return the same
// bytes: the second read must produce the same checksum and digest)
// and they are settled exactly. Without reread that is ErrSecondRead.
// Memory: the filter, the suspects (with 64 bits a job, about one in a
// million jobs is a false suspect; above 2 million jobs the fixed 16 MiB
// filter fills and suspects, hence second reads, become likely) and the
// waiting jobs' parents of smaller IDs, plus what Restore keeps of
// schedules, limits and batches (not jobs). size 0: unknown, the largest
// filter.
func VerifySnapshot(r io.Reader, size int64, reread func() (io.ReadCloser, error)) (SnapshotInfo, error) {
	return verifyWith(r, newBloom(size), reread)
}

// verifyWith is VerifySnapshot with the filter given (tests give a tiny
// one, so the second read runs).
func verifyWith(r io.Reader, b bloom, reread func() (io.ReadCloser, error)) (SnapshotInfo, error) {
	v := &verifySink{seed: maphash.MakeSeed(), bloom: b, suspect: map[string]int{}, need: map[string]struct{}{}, back: map[string]bool{}}
	st, err := readStream(r, v)
	if err != nil {
		return SnapshotInfo{}, err
	}
	info := SnapshotInfo{Version: v.version, Index: st.index, Jobs: v.jobs, Digest: st.sum()}
	if len(v.suspect) == 0 && len(v.back) == 0 {
		return info, nil
	}
	if reread == nil {
		return SnapshotInfo{}, ErrSecondRead
	}
	rc, err := reread()
	if err != nil {
		return SnapshotInfo{}, err
	}
	defer rc.Close()
	v.second, v.bloom, v.jobs = true, nil, 0
	st2, err := readStream(rc, v)
	if err != nil {
		return SnapshotInfo{}, err
	}
	if again := (SnapshotInfo{Version: v.version, Index: st2.index, Jobs: v.jobs, Digest: st2.sum()}); again != info {
		return SnapshotInfo{}, corrupt("the second read is another stream (index %d, %d jobs; first %d, %d jobs)", again.Index, again.Jobs, info.Index, info.Jobs)
	}
	return info, nil
}

// verifySink checks the rules between job records (VerifySnapshot) and
// keeps no job.
type verifySink struct {
	second  bool // the second read: settle suspects and back
	version uint16
	jobs    int
	seed    maphash.Seed
	bloom   bloom
	// suspect: fingerprinted keys met twice in the filter (first read),
	// then how many records hold each (second read).
	suspect map[string]int
	// need: parents of greater IDs than their waiting job's, not passed
	// yet; back: parents of smaller IDs, true once held and not ended.
	need map[string]struct{}
	back map[string]bool
	buf  []byte
}

var _ jobSink = (*verifySink)(nil)

// Fingerprint domains: the three keys that only one job may hold.
const (
	fpKey  = 'K' // idempotency key
	fpUniq = 'U' // held unique key
	fpItem = 'I' // queue index key: queue, index, item
)

func (v *verifySink) job(st *state, j *job, sum [4]uint64) error {
	v.jobs++
	lanesAdd(&st.acc, sum)
	if j.key != "" {
		v.buf = appendStr(append(v.buf[:0], fpKey), j.key)
		if err := v.fingerprint(j, "idempotency key shared"); err != nil {
			return err
		}
	}
	if u := j.uniq(); u != nil && u.held {
		k := u.key(j)
		v.buf = appendStr(appendStr(append(v.buf[:0], fpUniq), k.queue), k.kind)
		v.buf = binary.BigEndian.AppendUint64(append(v.buf, k.sum[:]...), uint64(k.window))
		if err := v.fingerprint(j, "unique key held by another job"); err != nil {
			return err
		}
	}
	it := itemOf(j) // its handle, 0, is in no key
	v.buf = append(appendStr(append(v.buf[:0], fpItem), j.cls.queue), indexOf(j.state))
	v.buf = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(v.buf, uint32(it.p)), uint64(it.a))
	v.buf = binary.BigEndian.AppendUint64(v.buf, it.seq)
	if err := v.fingerprint(j, "duplicate index key"); err != nil {
		return err
	}
	return v.parents(j)
}

// fingerprint checks the key in v.buf, held by j: first read, a key the
// filter may have met is kept as a suspect; second read, a suspect held
// twice is refused with why.
func (v *verifySink) fingerprint(j *job, why string) error {
	if v.second {
		if n, ok := v.suspect[string(v.buf)]; ok {
			if n > 0 {
				return corrupt("job %q: %s", j.id, why)
			}
			v.suspect[string(v.buf)] = n + 1
		}
		return nil
	}
	if v.bloom.add(maphash.Bytes(v.seed, v.buf)) {
		v.suspect[string(v.buf)] = 0
	}
	return nil
}

// parents checks the waiting rule (state.checkWaiting) as far as one read
// can: j may be a parent someone waits for, and j may wait itself.
func (v *verifySink) parents(j *job) error {
	if v.second {
		if _, ok := v.back[j.id]; ok {
			v.back[j.id] = !j.state.Terminal()
		}
		return nil
	}
	if _, ok := v.need[j.id]; ok {
		if j.state.Terminal() {
			return corrupt("unmet parent %q of a waiting job ended", j.id)
		}
		delete(v.need, j.id)
	}
	if j.state != StateWaiting {
		return nil
	}
	for _, p := range j.dep().open {
		switch {
		case p > j.id:
			v.need[p] = struct{}{}
		case p < j.id:
			v.back[p] = false
		}
	}
	return nil
}

func (v *verifySink) end(_ *state, version uint16) error {
	if !v.second {
		v.version = version
		for p := range v.need {
			return corrupt("unmet parent %q of a waiting job not held", p)
		}
		return nil
	}
	for p, ok := range v.back {
		if !ok {
			return corrupt("unmet parent %q of a waiting job not held or ended", p)
		}
	}
	return nil
}

// indexOf names the queue index a job of state s is kept in (queue.tree):
// the ended states share one.
func indexOf(s State) byte {
	if s.Terminal() {
		return byte(StateSucceeded)
	}
	return byte(s)
}

// Jobs is the number of jobs in the snapshot (a size hint for
// VerifySnapshot: a job's record is at least 64 bytes).
func (sn *snapshot) Jobs() int { return sn.jobs.Len() }

// bloom is a Bloom filter over 64-bit hashes: six probes by double
// hashing, a power of two bits.
type bloom []uint64

const (
	bloomMin    = 4 << 10
	bloomMax    = 16 << 20
	bloomProbes = 6
)

func newBloom(size int64) bloom {
	n := int64(bloomMax)
	if size > 0 {
		n = bloomMin
		for n < bloomMax && n < size/8 {
			n *= 2
		}
	}
	return make(bloom, n/8)
}

// add sets h's bits and reports whether all were set already (h, or
// another, was added before).
func (b bloom) add(h uint64) bool {
	mask := uint64(len(b))*64 - 1
	h1, h2 := h, h>>32|1
	seen := true
	for i := range uint64(bloomProbes) {
		bit := (h1 + i*h2) & mask
		w, m := bit/64, uint64(1)<<(bit%64)
		if b[w]&m == 0 {
			seen = false
			b[w] |= m
		}
	}
	return seen
}
