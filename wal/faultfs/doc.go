// Package faultfs is a wal.FS that injects the faults of a failing disk
// (write errors, short writes, fsync errors, a full disk, a stall, Syncs
// held), the two halves of a lying one (Checkpoint, Restore), and an
// honest power loss (PowerLoss). It is a separate package so that no host
// binary links it; a log takes it through wal.WithFS.
//
// # Power loss
//
// An ordinary crash of the machine loses everything that was not yet
// fsynced and keeps everything that was. A SIGKILL does not model it: the
// page cache survives the process. PowerLoss does, on the real disk: at the
// instant it is called every file and directory written through the FS
// goes back to its last synced state, and every later operation through the
// FS, or through a file opened from it, fails with ErrPowerLost and changes
// nothing. A process-level harness calls PowerLoss in the member and then
// kills the member; an in-process test calls it, abandons (closes) what
// used the FS, and reopens the directory with a fresh FS (or the os).
//
// What "last synced state" is:
//
//   - A file's contents and size are those it had when the last Sync of it
//     (through any of its handles) that returned nil was called: bytes
//     overwritten since get their synced contents back, and the file is cut
//     (or extended with its old bytes) to its synced size. That is
//     fdatasync: a Sync makes the file's data and size durable, not its
//     name. A file the FS created starts synced empty.
//   - A directory's entries are those it had at its last SyncDir that
//     returned nil: a file or directory created since is removed (with
//     everything under it), one removed since comes back (with its own
//     synced contents and entries), a rename since is undone, an entry a
//     rename replaced comes back.
//   - Whatever the FS had not touched before (files and directories it
//     finds on disk the first time it meets their path) is taken as durable
//     as found: a fresh FS over a directory written by an earlier process
//     trusts that process's fsyncs.
//   - Files not written through the FS (another process, the os package,
//     a bbolt database in the same directory) are not part of the model and
//     keep whatever they hold; the caller must stop their writers at the
//     loss (a harness kills the process).
//
// To bring things back, the FS keeps, in memory, an undo record of the
// bytes each write or truncation overwrote since the file's last Sync (read
// before the change), and for each directory what every name changed since
// its last SyncDir durably held. A removal (or an entry replaced by a
// rename) whose directory durably holds the entry is carried out by moving
// it aside within its directory, under a name beginning with ".faultfs-"
// that ReadDirNames never lists and callers may not use (ErrReservedName);
// the directory's next SyncDir removes it for good, PowerLoss puts it back.
// Memory grows with the bytes overwritten between Syncs only: appends past
// the synced size cost nothing.
//
// Conservative choices, each a legal outcome of a real power loss:
//
//   - A write that completes while a Sync of its file runs is not made
//     durable by that Sync (the Sync keeps the file as it was when called).
//   - Renames of files and directories are modelled within one directory
//     only; across directories they are refused (ErrCrossDir). wal and
//     snapshot rename within one directory.
//   - SyncDir holds off every change of names through the FS while it runs
//     (a file system may serialise them so), so it makes exactly the
//     entries of the instant it was called durable.
//   - A Sync or SyncDir that failed (an armed fault, or the real one) makes
//     nothing durable: after a failed fsync the disk holds some unknown
//     mix, and the synced state is one.
//   - A Sync or SyncDir under way when the power goes returns ErrPowerLost
//     even if its fsync had completed: a caller is told "synced" only of
//     what survives. Syncs held by HoldSyncs return at once.
//   - A write under way when PowerLoss is called completes first and is
//     then reverted like any unsynced write; one that starts after fails.
//   - The undo reverts whole writes; a real disk could also tear a write
//     into sectors, which this model never does (the wal's torn-tail tests
//     cover torn writes).
//
// PowerLossAt picks the instant: every change of the disk through the FS is
// numbered when attempted (Changes), and the loss is armed just before one
// of them; a harness runs a scenario once to count its changes, then once
// per change with the loss before it (LostBefore names it).
//
// The FS also has the directory operations of a snapshot store (Mkdir,
// RemoveAll, Stat; it is a snapshot.FS), under the same model.
//
// The lying disk (Checkpoint, Restore) is the other model: fsyncs that
// succeed but are not honoured. It stays independent of PowerLoss, which
// models an honest disk.
package faultfs
