// Package locktest watches flock(2) waiters in the kernel's lock table, so
// a test can tell that a process waits for a lock (and reaches that point)
// without sleeping in its place.
package locktest

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Inode is the inode number of the file at p.
func Inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// WaitForWaiter waits until /proc/locks shows a process blocked on an
// flock of the file with inode ino; done receiving first (the waiter went
// on without waiting) fails the test, with what.
func WaitForWaiter[T any](t *testing.T, ino uint64, done <-chan T, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !blockedOn(t, ino) {
		select {
		case <-done:
			t.Fatal(what)
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
