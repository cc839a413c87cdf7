package faultfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The directory half of the power-loss model: which names of each
// directory changed since its last SyncDir, and what was durably there.

// hiddenPrefix begins the name of an entry moved aside: removed (or
// replaced by a rename) while its removal is not durable yet.
const hiddenPrefix = ".faultfs-"

func reserved(path string) bool { return strings.HasPrefix(filepath.Base(path), hiddenPrefix) }

// absPath returns name as an absolute, clean path.
func absPath(name string) (string, error) {
	p, err := filepath.Abs(name)
	if err != nil {
		return "", fmt.Errorf("faultfs: %w", err)
	}
	return p, nil
}

// ensure returns the node at path, tracking it if the FS had not touched it
// yet (then it, and every ancestor, is taken as durable as found); nil when
// nothing is there. nsmu held.
func (p *power) ensure(path string) (*node, error) {
	if n := p.byPath[path]; n != nil {
		return n, nil
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	parent, err := p.ensure(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	if parent == nil {
		return nil, fmt.Errorf("faultfs: %s exists but its directory does not", path)
	}
	n := &node{parent: parent, name: filepath.Base(path), dir: fi.IsDir()}
	if !n.dir {
		n.size, n.synced = fi.Size(), fi.Size()
	}
	p.attach(n)
	return n, nil
}

// attach enters n under its parent and in byPath. nsmu held.
func (p *power) attach(n *node) {
	if n.parent.kids == nil {
		n.parent.kids = map[string]*node{}
	}
	n.parent.kids[n.name] = n
	p.index(n)
}

func (p *power) index(n *node) {
	p.byPath[n.path()] = n
	for _, k := range n.kids {
		p.index(k)
	}
}

func (p *power) unindex(n *node) {
	delete(p.byPath, n.path())
	for _, k := range n.kids {
		p.unindex(k)
	}
}

// drop forgets n and everything under it: gone from disk. nsmu held.
func (p *power) drop(n *node) {
	p.unindex(n)
	delete(n.parent.kids, n.name)
	var kill func(*node)
	kill = func(m *node) {
		m.dead = true
		for _, k := range m.kids {
			kill(k)
		}
	}
	kill(n)
}

// changed records that name of d is about to change: the first change since
// d's last SyncDir remembers what was durably there (its current occupant,
// tracked by the caller). nsmu held.
func (p *power) changed(d *node, name string) {
	if d.dur == nil {
		d.dur = map[string]*node{}
	}
	if _, ok := d.dur[name]; !ok {
		d.dur[name] = d.kids[name]
	}
}

// durable reports whether n, an entry of d, is durably an entry of d: it is
// what some changed name of d durably holds, or it sits, not moved aside,
// at a name that did not change. nsmu held.
func (p *power) durable(d, n *node) bool {
	for _, v := range d.dur {
		if v == n {
			return true
		}
	}
	_, changed := d.dur[n.name]
	return !changed && !n.hidden
}

// move renames n, within its directory, to name, with do doing the real
// rename. nsmu held.
func (p *power) move(n *node, name string, hidden bool, do func(from, to string) error) error {
	from, to := n.path(), filepath.Join(n.parent.path(), name)
	if err := do(from, to); err != nil {
		return err
	}
	p.unindex(n)
	delete(n.parent.kids, n.name)
	n.name, n.hidden = name, hidden
	p.attach(n)
	return nil
}

// hide moves n aside under a fresh hidden name: one no entry of its
// directory holds, not even a leftover of an earlier process over the same
// directory (one killed before the directory's SyncDir removed what it had
// moved aside). nsmu held.
func (p *power) hide(n *node) error {
	name := hiddenPrefix + strconv.FormatUint(p.hidden, 10)
	p.hidden++
	for _, err := os.Lstat(filepath.Join(n.parent.path(), name)); err == nil; _, err = os.Lstat(filepath.Join(n.parent.path(), name)) {
		name = hiddenPrefix + strconv.FormatUint(p.hidden, 10)
		p.hidden++
	}
	if err := p.move(n, name, true, os.Rename); err != nil {
		return fmt.Errorf("faultfs: move %s aside: %w", n.path(), err)
	}
	return nil
}

// remove removes n: moved aside while its removal is not durable (its
// directory durably holds it), removed for good with gone otherwise. nsmu
// held.
func (p *power) remove(n *node, gone func() error) error {
	d := n.parent
	p.changed(d, n.name)
	if p.durable(d, n) {
		return p.hide(n)
	}
	if err := gone(); err != nil {
		return err
	}
	p.drop(n)
	return nil
}

// realRemove removes n's file or directory (with what is under it) for
// good. Moved-aside entries make a directory that callers see as empty
// hold files, so a directory always goes with RemoveAll.
func realRemove(n *node) error {
	if n.dir {
		return os.RemoveAll(n.path())
	}
	return os.Remove(n.path())
}

// visibleNames lists dir without the entries moved aside.
func visibleNames(names []string) []string {
	out := names[:0:0]
	for _, n := range names {
		if !strings.HasPrefix(n, hiddenPrefix) {
			out = append(out, n)
		}
	}
	return out
}

// emptyDir reports whether the directory at path holds no visible entry.
func emptyDir(path string) (bool, error) {
	ents, err := os.ReadDir(path)
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), hiddenPrefix) {
			return false, nil
		}
	}
	return true, nil
}

// mkdir creates the directory path (its parent exists). nsmu held.
func (p *power) mkdir(path string, perm os.FileMode) error {
	if err := os.Mkdir(path, perm); err != nil {
		return err
	}
	d, err := p.ensure(filepath.Dir(path))
	if err != nil || d == nil {
		return fmt.Errorf("faultfs: mkdir %s: its directory: %v", path, err)
	}
	p.changed(d, filepath.Base(path))
	p.attach(&node{parent: d, name: filepath.Base(path), dir: true})
	return nil
}

// syncedDir makes d's current entries its durable ones and removes for
// good the entries moved aside, whose removal is now durable. nsmu held.
func (p *power) syncedDir(d *node) error {
	d.dur = nil
	var errs []error
	for _, k := range sortedKids(d) {
		if !k.hidden {
			continue
		}
		if err := realRemove(k); err != nil {
			errs = append(errs, fmt.Errorf("faultfs: remove %s: %w", k.path(), err))
			continue
		}
		p.drop(k)
	}
	return errors.Join(errs...)
}

// revertNames puts d's entries back as they were at its last SyncDir: every
// entry at a changed name that is not durably there is moved aside, every
// entry durably at a changed name is moved back to it, and whatever is left
// aside is removed for good. pl held exclusively, nsmu held.
func (p *power) revertNames(d *node) error {
	if len(d.dur) == 0 {
		return nil
	}
	names := make([]string, 0, len(d.dur))
	for name := range d.dur {
		names = append(names, name)
	}
	var errs []error
	for _, name := range names {
		if cur := d.kids[name]; cur != nil && cur != d.dur[name] {
			if err := p.hide(cur); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, name := range names {
		want := d.dur[name]
		if want == nil || d.kids[name] == want {
			continue
		}
		if err := p.move(want, name, false, os.Rename); err != nil {
			errs = append(errs, fmt.Errorf("faultfs: power loss: put back %s: %w", name, err))
		}
	}
	d.dur = nil
	for _, k := range sortedKids(d) {
		if !k.hidden {
			continue
		}
		if err := realRemove(k); err != nil {
			errs = append(errs, fmt.Errorf("faultfs: power loss: remove %s: %w", k.path(), err))
			continue
		}
		p.drop(k)
	}
	return errors.Join(errs...)
}
