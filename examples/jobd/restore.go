package main

// jobd restore: seed one member's data dir of a NEW cluster from a backup
// (GET /v1/cluster/backup, jobctl backup).

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/jobraft/jobraft"
	"github.com/jobraft/jobraft/backup"
)

// errRestore: jobd restore refused (the message says why); nothing was
// written. errRestoreUsage: its command line is wrong (exit status 2).
var (
	errRestore      = errors.New("restore refused")
	errRestoreUsage = errors.New("restore usage")
)

const restoreUsage = `usage: jobd restore -from FILE -data DIR -id ID -peers ID=HOST:PORT,... -cluster-id NEW

Seeds DIR (empty or absent) as member ID of a new cluster from a backup
file. Run it once per member, with the same -from, -peers and -cluster-id,
then start each member as usual with those -peers and -cluster-id:
every member starts at the backup's index with the backup's state digest.
-cluster-id must differ from the backup's cluster: the restored cluster is
a new one (give it new member certificates too). The backup is checked
whole (header, manifest, SHA-256, the state rebuilt to its digest) before
anything is written; a corrupt backup is refused and DIR is left as it was.
`

// restoreCmd runs jobd restore; it prints what it did on out.
func restoreCmd(args []string, out io.Writer) error {
	fset := flag.NewFlagSet("jobd restore", flag.ContinueOnError)
	fset.SetOutput(out)
	fset.Usage = func() { fmt.Fprint(fset.Output(), restoreUsage); fset.PrintDefaults() }
	from := fset.String("from", "", "backup file")
	data := fset.String("data", "", "the member's data dir (empty or absent)")
	id := fset.String("id", "", "this member's ID")
	peers := fset.String("peers", "", "the new cluster's members id=host:port,... (this one included)")
	cluster := fset.String("cluster-id", "", "the new cluster's ID (pass the same -cluster-id when starting the members)")
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %w", errRestoreUsage, err)
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"-from", *from}, {"-data", *data}, {"-id", *id}, {"-peers", *peers}, {"-cluster-id", *cluster}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 || fset.NArg() > 0 {
		return fmt.Errorf("%w: %s required, and no arguments (got %q)", errRestoreUsage, strings.Join(missing, ", "), fset.Args())
	}
	o := options{ID: *id, Peers: *peers}
	for _, p := range strings.Split(*peers, ",") {
		if pid, addr, ok := strings.Cut(strings.TrimSpace(p), "="); ok && pid == *id {
			o.RaftAddr = addr
		}
	}
	members, err := o.members()
	if err != nil {
		return fmt.Errorf("%w: %w", errRestoreUsage, err)
	}
	if err := emptyDir(*data); err != nil {
		return err
	}
	// The manifest first: a backup of the cluster being created is refused
	// before the (long) check of the whole file.
	m, err := readManifest(*from)
	if err != nil {
		return err
	}
	if m.ClusterID != "" && m.ClusterID == *cluster {
		return fmt.Errorf("%w: -cluster-id %s is the backup's own cluster: a restored cluster is a new cluster, give it a new ID", errRestore, *cluster)
	}
	_, statErr := os.Stat(*data)
	existed := statErr == nil
	unlock, err := lockDataDir(*data)
	if err != nil {
		return err
	}
	defer unlock()
	m, err = jobraft.Restore(*from, *data, members)
	if err != nil {
		// Restore wrote nothing; take back what the lock created.
		if existed {
			os.Remove(filepath.Join(*data, lockFile))
		} else {
			os.RemoveAll(*data)
		}
		return fmt.Errorf("%w: %w", errRestore, err)
	}
	if err := writeIdentity(*data, identity{Version: identityVersion, Cluster: *cluster, Member: *id, Peers: *peers}); err != nil {
		return err
	}
	fmt.Fprintf(out, "restored %s into %s as member %s of cluster %s: index %d, %d jobs, state digest %s (backup of cluster %q taken on %s at %s)\n",
		*from, *data, *id, *cluster, m.Index, m.Jobs, m.StateDigest, m.ClusterID, m.Member, m.Created.Format("2006-01-02T15:04:05Z"))
	return nil
}

func readManifest(path string) (*backup.Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, _, err := backup.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errRestore, path, err)
	}
	return m, nil
}

// emptyDir refuses a data dir that exists and holds anything.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(ents) > 0:
		return fmt.Errorf("%w: data dir %s is not empty (%d entries): restore seeds a new member only", errRestore, dir, len(ents))
	}
	return nil
}
