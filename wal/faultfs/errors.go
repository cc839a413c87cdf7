package faultfs

import "errors"

// ErrPowerLost is what every operation through an FS, and through every file
// opened from it, returns after the FS's PowerLoss (wrapped in an
// *os.PathError or *os.LinkError naming the path; errors.Is finds it). Such
// an operation changes nothing on disk. A Sync that was under way when the
// power went returns it too, never success.
var ErrPowerLost = errors.New("faultfs: power lost")

// ErrCrossDir refuses a Rename between two directories: the power-loss
// model tracks renames within one directory only (what wal and snapshot
// do). Nothing is changed.
var ErrCrossDir = errors.New("faultfs: rename across directories is not modelled")

// ErrReservedName refuses a name that begins with the prefix the FS gives
// the entries it moved aside (".faultfs-"): those are hidden from
// ReadDirNames and must not be created, renamed to or opened by callers.
// Nothing is changed.
var ErrReservedName = errors.New("faultfs: reserved name")
