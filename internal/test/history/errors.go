package history

import "errors"

// Errors of reading and writing history files.
var (
	// ErrCorrupt: a history file's header or a record before its last one
	// fails its checksum or structure check (ReadFile, OpenFile). A damaged
	// last record is a torn write and is ignored instead.
	ErrCorrupt = errors.New("history: corrupt applied-history file")
	// ErrVersion: a history file of an unknown format version.
	ErrVersion = errors.New("history: unknown applied-history file version")
)
