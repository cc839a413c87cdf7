package segment

import (
	"encoding/binary"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

var stableBucket = []byte("stable")

const stableFile = "stable.db"

func openStable(path string) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(stableBucket)
		return err
	}); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Set implements raft.StableStore. It is durable when it returns. After
// Close it returns ErrClosed.
func (l *Store) Set(key, val []byte) error {
	if l.isClosed() {
		return ErrClosed
	}
	return stableErr(l.stable.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(stableBucket).Put(key, val)
	}))
}

func (l *Store) isClosed() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.closed
}

// stableErr is ErrClosed for bbolt's closed database (a call that raced
// Close), else err.
func stableErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// Get implements raft.StableStore; a missing key is ErrKeyNotFound ("not
// found", which hashicorp/raft compares by text). After Close it returns
// ErrClosed.
func (l *Store) Get(key []byte) ([]byte, error) {
	if l.isClosed() {
		return nil, ErrClosed
	}
	var out []byte
	err := l.stable.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(stableBucket).Get(key)
		if v == nil {
			return ErrKeyNotFound
		}
		out = append([]byte(nil), v...)
		return nil
	})
	return out, stableErr(err)
}

// SetUint64 implements raft.StableStore.
func (l *Store) SetUint64(key []byte, val uint64) error {
	return l.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore.
func (l *Store) GetUint64(key []byte) (uint64, error) {
	v, err := l.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, &GuardError{Op: OpGet, Err: ErrCorrupt, Detail: "stable store value is not 8 bytes"}
	}
	return binary.BigEndian.Uint64(v), nil
}
