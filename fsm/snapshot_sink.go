package fsm

// jobSink takes the job records readStream decodes (on decoder
// goroutines, handed over in stream order: snapshot_load.go; the sink
// runs on one goroutine at a time): restore builds the state from them
// (restoreSink), VerifySnapshot checks the rules between records without
// keeping them (verifySink, snapshot_verify.go). Every
// rule of one record alone, and the stream's layout, order, counts,
// checksum and digest, are readStream's: both share them.
type jobSink interface {
	// job takes one decoded record that passed the checks of a record
	// alone, in ID order, and its hash (state.hash). It adds the hash to
	// st.acc (the digest is compared after end).
	job(st *state, j *job, sum [4]uint64) error
	// end runs after the checksum and before the digest is compared.
	end(st *state, version uint16) error
}

// restoreSink keeps every job in st: its indexes refuse what two records
// may not share (a unique key held, an idempotency key, a queue index
// key).
type restoreSink struct{}

var _ jobSink = restoreSink{}

func (restoreSink) job(st *state, j *job, sum [4]uint64) error {
	if st.uniqueTaken(j) {
		return corrupt("job %q: unique key held by another job", j.id)
	}
	if j.key != "" {
		if _, dup := st.keys.Get(keyEnt{key: j.key}); dup {
			return corrupt("job %q: idempotency key shared", j.id)
		}
	}
	if !st.putSum(j, sum) {
		return corrupt("job %q: duplicate index key", j.id)
	}
	return nil
}

func (restoreSink) end(st *state, _ uint16) error {
	if why := st.checkWaiting(); why != "" {
		return corrupt("%s", why)
	}
	return nil
}
