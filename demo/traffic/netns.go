package traffic

import (
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	kernelnetns "github.com/netclass-dev/netclass/plugins/kernel/netns"
)

// NS is a named network namespace (ip netns), at Path.
type NS struct {
	Name string
	Path string
}

// CreateNS makes a named namespace with lo up; the caller deletes it.
func CreateNS(name string) (*NS, error) {
	if err := createNamed(name); err != nil {
		return nil, fmt.Errorf("create netns %q: %w", name, err)
	}
	n := &NS{Name: name, Path: "/var/run/netns/" + name}
	err := n.Run(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("set lo up in %q: %w", name, err), n.Delete())
	}
	return n, nil
}

// Delete removes the namespace (and every link inside it); one already
// deleted is success.
func (n *NS) Delete() error {
	if err := netns.DeleteNamed(n.Name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %q: %w", n.Name, err)
	}
	return nil
}

// Run runs fn on a thread inside the namespace (plugins/kernel/netns, the one
// place netclass enters namespaces).
func (n *NS) Run(fn func() error) error { return kernelnetns.Do(n.Path, fn) }

// createNamed makes the named namespace without leaving the calling thread in it.
func createNamed(name string) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	h, err := netns.NewNamed(name)
	if err != nil {
		// NewNamed may have switched before failing: restore or lose the thread.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
		return err
	}
	h.Close()
	if err := netns.Set(orig); err != nil {
		return fmt.Errorf("return to the original netns: %w", err) // thread stays locked and dies
	}
	runtime.UnlockOSThread()
	return nil
}
