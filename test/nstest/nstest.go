// Package nstest gives privileged tests their own network namespaces: each
// test creates fresh, uniquely named namespaces that are deleted (with every
// link inside them) when the test ends, pass or fail. Nothing a test does
// touches the machine's own namespace.
package nstest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/netclass-dev/netclass/demo/traffic"
	kernelnetns "github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// Prefix starts the name of every namespace tests create, so a leak is easy
// to spot (`ip netns list`).
const Prefix = "nct-"

// NS is a named network namespace owned by one test.
type NS struct {
	Name string
	Path string
}

// RequireRoot fails the test (never skips it) when not run as root.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("this test needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN): run it through `make test`, which runs as root")
	}
}

// New creates a namespace with lo up, deleted when the test ends.
func New(t testing.TB) *NS {
	t.Helper()
	RequireRoot(t)
	if gone, err := sweepOrphans(); len(gone) > 0 || err != nil {
		t.Logf("deleted the namespaces of test processes that no longer run: %v (%v)", gone, err)
	}
	n, err := Create(uniqueName(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Delete(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return n
}

// Create makes a named namespace with lo up (for programs outside tests,
// such as the demo, which delete it themselves): demo/traffic's.
func Create(name string) (*NS, error) {
	n, err := traffic.CreateNS(name)
	if err != nil {
		return nil, err
	}
	return &NS{Name: n.Name, Path: n.Path}, nil
}

// Delete removes the namespace (and every link inside it); one already
// deleted is success.
func (n *NS) Delete() error { return kernelnetns.DeleteNamed(n.Name) }

// Do runs fn with the calling goroutine's thread inside the namespace.
func (n *NS) Do(t testing.TB, fn func() error) {
	t.Helper()
	if err := n.Run(fn); err != nil {
		t.Fatalf("in netns %s: %v", n.Name, err)
	}
}

// Run is Do returning the error instead of failing the test, for use from
// goroutines other than the test's. Unlike plugins/kernel/netns.Do, which
// runs fn on a goroutine of its own, it runs fn on the calling goroutine, so
// fn may call t.Fatal.
func (n *NS) Run(fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	h, err := netns.GetFromPath(n.Path)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	fnErr := fn()
	if err := netns.Set(orig); err != nil {
		return fmt.Errorf("return to the original netns: %w", err) // thread stays locked and dies
	}
	runtime.UnlockOSThread()
	return fnErr
}

// Handle returns a netlink handle bound to the namespace, closed at cleanup.
func (n *NS) Handle(t testing.TB) *netlink.Handle {
	t.Helper()
	h, err := netns.GetFromPath(n.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nh.Close)
	return nh
}

// Fd returns a file descriptor of the namespace, closed at cleanup.
func (n *NS) Fd(t testing.TB) int {
	t.Helper()
	h, err := netns.GetFromPath(n.Path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return int(h)
}

// Link finds a link inside the namespace.
func (n *NS) Link(t testing.TB, name string) netlink.Link {
	t.Helper()
	l, err := n.Handle(t).LinkByName(name)
	if err != nil {
		t.Fatalf("link %q in %s: %v", name, n.Name, err)
	}
	return l
}

// HasLink reports whether a link exists inside the namespace.
func (n *NS) HasLink(t testing.TB, name string) bool {
	t.Helper()
	_, err := n.Handle(t).LinkByName(name)
	return err == nil
}

// Veth connects two namespaces with a veth pair, both ends up, with the
// given addresses (CIDR form, may be empty).
func Veth(t testing.TB, a *NS, aName, aAddr string, b *NS, bName, bAddr string) {
	t.Helper()
	bh, err := netns.GetFromPath(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer bh.Close()
	a.Do(t, func() error {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = aName
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: bName, PeerNamespace: netlink.NsFd(int(bh))})
	})
	for _, end := range []struct {
		ns         *NS
		name, addr string
	}{{a, aName, aAddr}, {b, bName, bAddr}} {
		end.ns.Do(t, func() error { return upWithAddr(end.name, end.addr) })
	}
}

// Bridge makes the named links of the namespace ports of a bridge, which
// it creates (up) first if it is not there yet.
func (n *NS) Bridge(t testing.TB, bridge string, ports ...string) {
	t.Helper()
	h := n.Handle(t)
	br, err := h.LinkByName(bridge)
	if err != nil {
		attrs := netlink.NewLinkAttrs()
		attrs.Name = bridge
		if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: attrs}); err != nil {
			t.Fatalf("create bridge %q in %s: %v", bridge, n.Name, err)
		}
		br = n.Link(t, bridge)
		if err := h.LinkSetUp(br); err != nil {
			t.Fatalf("set bridge %q up in %s: %v", bridge, n.Name, err)
		}
	}
	for _, p := range ports {
		if err := h.LinkSetMaster(n.Link(t, p), br); err != nil {
			t.Fatalf("put %q into bridge %q in %s: %v", p, bridge, n.Name, err)
		}
	}
}

func upWithAddr(name, cidr string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if cidr != "" {
		addr, err := netlink.ParseAddr(cidr)
		if err != nil {
			return err
		}
		addr.Flags |= 0x02 // IFA_F_NODAD: usable at once
		if err := netlink.AddrAdd(l, addr); err != nil {
			return fmt.Errorf("add %s to %s: %w", cidr, name, err)
		}
	}
	return netlink.LinkSetUp(l)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}
