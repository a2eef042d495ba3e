package nad

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// trusted checks that the rendered file at path, and the directory it is
// in, are root's and writable by root alone, as netclass-dra writes them.
// netclass-nad runs as root what the file lists, from a stateDir its
// config names: a NAD naming a directory others can write (a pod's
// emptyDir) must not make it run a list they wrote.
func trusted(path string) error {
	for _, c := range []struct {
		path, kind string
		is         func(fs.FileMode) bool
	}{
		{filepath.Dir(path), "directory", fs.FileMode.IsDir},
		{path, "regular file", fs.FileMode.IsRegular},
	} {
		fi, err := os.Lstat(c.path)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || !c.is(fi.Mode()) {
			return fmt.Errorf("%s is not a %s", c.path, c.kind)
		}
		if st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
			return fmt.Errorf("%s is not root's alone (owner %d, mode %v): netclass-dra writes these files as root, writable by root only", c.path, st.Uid, fi.Mode().Perm())
		}
	}
	return nil
}
