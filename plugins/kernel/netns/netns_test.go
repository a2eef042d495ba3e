package netns_test

import (
	"errors"
	"os"
	"testing"

	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/test/nstest"
)

// A named namespace is made without moving the caller, entered by Do, and
// deleted (twice is success); Do on it then says ErrNotFound.
func TestNamedLifecycle(t *testing.T) {
	nstest.RequireRoot(t)
	name := nstest.Prefix + "named-lifecycle"
	before, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	path, err := netns.CreateNamed(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.DeleteNamed(name) })
	if after, _ := os.Readlink("/proc/thread-self/ns/net"); after != before {
		t.Errorf("the calling thread moved from %s to %s", before, after)
	}
	var inside string
	if err := netns.Do(path, func() error {
		inside, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil || inside == before {
		t.Fatalf("Do ran in %q (host %q): %v", inside, before, err)
	}
	for range 2 {
		if err := netns.DeleteNamed(name); err != nil {
			t.Fatalf("DeleteNamed: %v", err)
		}
	}
	if err := netns.Do(path, func() error { return nil }); !errors.Is(err, netns.ErrNotFound) {
		t.Errorf("Do on a deleted namespace: %v, want ErrNotFound", err)
	}
}
