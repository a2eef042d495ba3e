package attach

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netclass-dev/netclass/test/locktest"
)

// A waiter that opened the lock's file before its holder removed it locks
// the file the path names afterwards: it never holds the name beside the
// process that made the new file.
func TestLockWaiterOfARemovedFileTakesTheNewOne(t *testing.T) {
	l := LockFile{Dir: t.TempDir(), Name: "vxlan-100"}
	releaseA, err := l.Lock()
	if err != nil {
		t.Fatal(err)
	}
	oldIno := locktest.Inode(t, l.path())
	bDone := make(chan func(), 1)
	go func() {
		release, err := l.Lock()
		if err != nil {
			t.Error(err)
			close(bDone)
			return
		}
		bDone <- release
	}()
	locktest.WaitForWaiter(t, oldIno, bDone, "the waiter locked a file its holder holds")
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	releaseC, err := l.Lock() // a new file: nobody holds it yet
	if err != nil {
		t.Fatal(err)
	}
	releaseA() // B takes the removed file, sees it removed, waits for C's
	locktest.WaitForWaiter(t, locktest.Inode(t, l.path()), bDone, "the waiter holds a lock while another process holds the file its path names")
	releaseC()
	release, ok := <-bDone
	if !ok {
		t.Fatal("the waiter failed")
	}
	release()
}

// Holders removing the file at random (last, as Remove asks) never
// overlap.
func TestLockHoldersNeverOverlapWhileRemoving(t *testing.T) {
	l := LockFile{Dir: t.TempDir(), Name: "vlan-ncbr0"}
	var held, overlaps atomic.Int32
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				release, err := l.Lock()
				if err != nil {
					t.Error(err)
					return
				}
				if held.Add(1) != 1 {
					overlaps.Add(1)
				}
				runtime.Gosched() // a holder's work: others run meanwhile
				if held.Load() != 1 {
					overlaps.Add(1)
				}
				held.Add(-1)
				if (i+w)%3 == 0 { // what it guards is gone: last
					if err := l.Remove(); err != nil {
						t.Error(err)
					}
				}
				release()
			}
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d times two holders at once", n)
	}
}

func TestLockRemoveOfAMissingOrUnnamedLock(t *testing.T) {
	dir := t.TempDir()
	if err := (LockFile{Dir: dir, Name: "gone"}).Remove(); err != nil {
		t.Errorf("a lock never taken: %v", err)
	}
	stray := filepath.Join(dir, "locks", ".lock")
	if err := os.MkdirAll(filepath.Dir(stray), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := (LockFile{Dir: dir}).Remove(); err != nil {
		t.Errorf("no name: %v", err)
	}
	if _, err := os.Stat(stray); err != nil {
		t.Errorf("a LockFile without a name removed %s: %v", stray, err)
	}
}

// Locks are taken in order; one that cannot be taken leaves none held, and
// Remove deletes every file.
func TestLocksTakeAllOrNone(t *testing.T) {
	a, b := LockFile{Dir: t.TempDir(), Name: "vxlan-7"}, LockFile{Dir: t.TempDir(), Name: "vxlan-7"}
	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (Locks{a, {Dir: blocked, Name: "vxlan-7"}}).Lock(); err == nil {
		t.Fatal("a lock under a file was taken")
	}
	if !free(t, a.path()) {
		t.Fatal("the first lock is still held after the second failed")
	}
	release, err := Locks{a, b}.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if free(t, a.path()) || free(t, b.path()) {
		t.Fatal("a lock of the set is not held")
	}
	if err := (Locks{a, b}).Remove(); err != nil {
		t.Fatal(err)
	}
	release()
	for _, p := range []string{a.path(), b.path()} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after Remove: %v", p, err)
		}
	}
}

// free reports whether nobody holds the flock of the file at p.
func free(t *testing.T, p string) bool {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
		return true // closing the file releases it
	case errors.Is(err, unix.EWOULDBLOCK):
		return false
	default:
		t.Fatal(err)
		return false
	}
}
