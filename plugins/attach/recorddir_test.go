package attach

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// A network's directory goes with its last record, and only then.
func TestDeleteRemovesTheEmptyNetworkDirectory(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	dir := filepath.Join(s.Dir, "blue")
	for _, c := range []string{"c1", "c2"} {
		if err := s.Put(&Record{Network: "blue", ContainerID: c, IfName: "net1"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete("blue", "c1", "net1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the directory went with a record while another was left: %v", err)
	}
	if err := s.Delete("blue", "c2", "net1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the directory of a network without records is left (stat: %v)", err)
	}
	if recs, err := s.List("blue"); len(recs) != 0 || err != nil {
		t.Fatalf("List of a network without a directory = %v, %v", recs, err)
	}
	if err := s.Delete("blue", "c2", "net1"); err != nil {
		t.Fatalf("Delete without a directory: %v", err)
	}
	if err := s.Put(&Record{Network: "blue", ContainerID: "c3", IfName: "net1"}); err != nil {
		t.Fatalf("Put after the directory went: %v", err)
	}
}

// Attachments of one network added and deleted at once, as a node's pods
// start and stop: a Put never fails because a Delete removed the
// directory it was about to write in, and nothing is left at the end.
func TestPutsAndDeletesOfOneNetworkAtOnce(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	const workers, rounds = 4, 300
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := fmt.Sprintf("c%d", w)
			for range rounds {
				if err := s.Put(&Record{Network: "blue", ContainerID: c, IfName: "net1"}); err != nil {
					errs <- err
					return
				}
				if r, err := s.Get("blue", c, "net1"); r == nil || err != nil {
					errs <- fmt.Errorf("record %s not there after its Put: %v", c, err)
					return
				}
				if err := s.Delete("blue", c, "net1"); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "blue")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the network's directory is left after its last record (stat: %v)", err)
	}
}

// A directory removed between its making and the file's creation (a last
// record deleted at that instant) is made again.
func TestInDirMakesTheDirectoryAgain(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bandwidth-share")
	calls := 0
	err := InDir(dir, func() error {
		calls++
		if calls == 1 {
			if err := os.Remove(dir); err != nil {
				t.Fatal(err)
			}
		}
		return os.WriteFile(filepath.Join(dir, "vx.json"), []byte("{}"), 0o600)
	})
	if err != nil || calls != 2 {
		t.Fatalf("InDir = %v after %d calls; want the file made at the second", err, calls)
	}
}
