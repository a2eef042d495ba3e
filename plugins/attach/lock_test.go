package attach

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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
	oldIno := inode(t, l.path())
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
	waitForWaiter(t, oldIno, nil)
	if err := l.Remove(); err != nil {
		t.Fatal(err)
	}
	releaseC, err := l.Lock() // a new file: nobody holds it yet
	if err != nil {
		t.Fatal(err)
	}
	releaseA() // B takes the removed file, sees it removed, waits for C's
	waitForWaiter(t, inode(t, l.path()), bDone)
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

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// waitForWaiter waits until /proc/locks shows a process blocked on an
// flock of the file with inode ino; done receiving first (the waiter took
// a lock it should be waiting for) fails the test.
func waitForWaiter(t *testing.T, ino uint64, done <-chan func()) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !blockedOn(t, ino) {
		select {
		case release, ok := <-done:
			if ok {
				release()
			}
			t.Fatal("the waiter holds a lock while another process holds the file its path names")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no process waits for the lock of inode %d", ino)
		}
		time.Sleep(time.Millisecond) // polling the kernel's lock table
	}
}

// blockedOn reads /proc/locks for a blocked FLOCK ("N: -> FLOCK ...") on
// inode ino (its field "major:minor:inode").
func blockedOn(t *testing.T, ino uint64) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/locks")
	if errors.Is(err, fs.ErrNotExist) {
		t.Fatal("no /proc/locks: the test reads waiters there")
	}
	if err != nil {
		t.Fatal(err)
	}
	suffix := ":" + strconv.FormatUint(ino, 10)
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) >= 7 && f[1] == "->" && f[2] == "FLOCK" && strings.HasSuffix(f[6], suffix) {
			return true
		}
	}
	return false
}
