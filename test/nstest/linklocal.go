package nstest

import (
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// LinkLocal returns the IPv6 link-local address of a link of the
// namespace, waiting for it: the kernel adds it only once the link has its
// carrier, which it learns asynchronously (a veth just set up, a slow
// kernel), so the test watches the namespace's address events rather than
// reading the list once. It fails the test after 10 s.
func (n *NS) LinkLocal(t testing.TB, name string) netip.Addr {
	t.Helper()
	h, err := netns.GetFromPath(n.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	updates := make(chan netlink.AddrUpdate)
	done := make(chan struct{})
	defer func() {
		close(done)
		go func() { // the subscription closes updates once it has seen done
			for range updates {
			}
		}()
	}()
	errs := make(chan error, 1)
	opts := netlink.AddrSubscribeOptions{Namespace: &h, ListExisting: true, ErrorCallback: func(err error) {
		select {
		case errs <- err:
		default:
		}
	}}
	if err := netlink.AddrSubscribeWithOptions(updates, done, opts); err != nil {
		t.Fatalf("watch the addresses of %s: %v", n.Name, err)
	}
	index := n.Link(t, name).Attrs().Index
	deadline := time.After(10 * time.Second)
	for {
		select {
		case u, ok := <-updates:
			if !ok {
				t.Fatalf("the address events of %s ended", n.Name)
			}
			ip, _ := netip.AddrFromSlice(u.LinkAddress.IP)
			if u.NewAddr && u.LinkIndex == index && ip.Is6() && ip.IsLinkLocalUnicast() {
				return ip
			}
		case err := <-errs:
			t.Fatalf("watch the addresses of %s: %v", n.Name, err)
		case <-deadline:
			t.Fatalf("%s in %s has no IPv6 link-local address after 10 s", name, n.Name)
		}
	}
}
