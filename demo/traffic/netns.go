package traffic

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"

	kernelnetns "github.com/netclass-dev/netclass/plugins/kernel/netns"
)

// NS is a named network namespace (ip netns), at Path.
type NS struct {
	Name string
	Path string
}

// CreateNS makes a named namespace with lo up; the caller deletes it.
func CreateNS(name string) (*NS, error) {
	path, err := kernelnetns.CreateNamed(name)
	if err != nil {
		return nil, err
	}
	n := &NS{Name: name, Path: path}
	err = n.Run(func() error {
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
func (n *NS) Delete() error { return kernelnetns.DeleteNamed(n.Name) }

// Run runs fn on a thread inside the namespace (plugins/kernel/netns, the one
// place netclass enters namespaces).
func (n *NS) Run(fn func() error) error { return kernelnetns.Do(n.Path, fn) }
