package attach

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// lockTries bounds how often Lock opens its file again because the holder
// it waited for removed it (each time, what the lock guarded was deleted
// meanwhile: another process made progress).
const lockTries = 50

// LockFile is an exclusive advisory lock: the file locks/<Name>.lock under
// Dir. Plugin processes racing on one shared object (a VXLAN device and its
// bridge) serialise on it; the kernel drops the lock if the process dies.
//
// The file of an object that is gone is removed (Remove), so a node's
// locks/ directory holds the objects it has, not every object it ever had
// (a tenant choosing a new VNI per Network would grow it without bound).
// A process that opened the file before its removal and waited finds, once
// it holds it, that the path no longer names its file, and locks the new
// one: two processes never hold the same name at once. (A plugin binary
// older than this check, still running during an upgrade, could hold the
// removed file beside a new one; that takes a DEL removing an object's
// last user while an older process waits for it.)
type LockFile struct {
	Dir  string
	Name string
}

func (l LockFile) path() string { return filepath.Join(l.Dir, "locks", l.Name+".lock") }

// Lock takes the lock and returns its release.
func (l LockFile) Lock() (func(), error) {
	p := l.path()
	for range lockTries {
		f, err := lockOpen(p)
		if err != nil {
			return nil, err
		}
		ok, err := isAt(f, p)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", p, err)
		}
		if ok {
			return func() { f.Close() }, nil // closing the file releases the lock
		}
		f.Close() // its holder removed it: lock the file the path names now
	}
	return nil, fmt.Errorf("lock %s: removed by its holder %d times while waiting for it", p, lockTries)
}

// Remove deletes the lock's file. The caller holds the lock, and calls it
// last, when what the lock guards is gone: the next Lock makes a new file
// and holds it at once, as if the lock were released (the release is still
// called, and frees the removed file's waiters). A LockFile without a name
// names nothing to remove.
func (l LockFile) Remove() error {
	if l.Name == "" {
		return nil // no lock named
	}
	if err := os.Remove(l.path()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove lock %s: %w", l.path(), err)
	}
	return nil
}

// Locks are locks held together, taken in their order: what a process
// needs whose object the processes of several lock directories use
// (netclass-dra's node engine, whose devices plugins with different dataDirs
// join). A holder of one of them only cannot deadlock with it; two holders
// of several must list the common ones in the same order.
type Locks []LockFile

// Lock takes every lock, in order, and returns their release; on an error
// it holds none.
func (ls Locks) Lock() (func(), error) {
	releases := make([]func(), 0, len(ls))
	release := func() {
		for _, r := range slices.Backward(releases) {
			r()
		}
	}
	for _, l := range ls {
		r, err := l.Lock()
		if err != nil {
			release()
			return nil, err
		}
		releases = append(releases, r)
	}
	return release, nil
}

// Remove deletes every lock's file (see LockFile.Remove).
func (ls Locks) Remove() error {
	errs := make([]error, 0, len(ls))
	for _, l := range ls {
		errs = append(errs, l.Remove())
	}
	return errors.Join(errs...)
}

// Lock is LockFile{dir, name}.Lock().
func Lock(dir, name string) (func(), error) { return LockFile{Dir: dir, Name: name}.Lock() }

// lockOpen opens (creating) the file at p and waits for its exclusive lock.
func lockOpen(p string) (*os.File, error) {
	var f *os.File
	err := InDir(filepath.Dir(p), func() (err error) {
		f, err = os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", p, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	return f, nil
}

// isAt reports whether the path p still names the open file f.
func isAt(f *os.File, p string) (bool, error) {
	var held, named unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &held); err != nil {
		return false, err
	}
	switch err := unix.Stat(p, &named); {
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case err != nil:
		return false, err
	}
	return held.Dev == named.Dev && held.Ino == named.Ino, nil
}
