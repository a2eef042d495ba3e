package attach

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Lock takes an exclusive advisory lock named name under dir/locks and
// returns its release. Plugin processes racing on one shared object (a
// VXLAN device and its bridge) serialise on it; the kernel drops the lock
// if the process dies.
func Lock(dir, name string) (func(), error) {
	p := filepath.Join(dir, "locks", name+".lock")
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
	return func() { f.Close() }, nil // closing the file releases the lock
}
