package qosport

import (
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/test/nstest"
)

// A pod's interface names its host end by the peer index a veth reports,
// which is an index in the peer's own namespace: a pod with CAP_NET_ADMIN
// can make a veth pair of its own whose peer index is that of another
// pod's host end, and whose own index is that pod's interface's. HostEnd
// must not take that host end for the pod's (the pod's NetworkQoS would be
// applied to the other pod's port).
func TestHostEndIsTheVethIntoThePodsNamespace(t *testing.T) {
	nstest.RequireRoot(t)
	host, a, c, b := nstest.New(t), nstest.New(t), nstest.New(t), nstest.New(t)
	nstest.Veth(t, a, "eth0", "", host, "ha", "") // host: lo 1, ha 2; a: lo 1, eth0 2
	nstest.Veth(t, c, "eth0", "", host, "hc", "") // host: hc 3; c: eth0 2
	b.Do(t, func() error {                        // b's own pair: eth0 2 (the peer, made first), x 3 (the index of hc)
		attrs := netlink.NewLinkAttrs()
		attrs.Name = "x"
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "eth0"})
	})
	index := func(n *nstest.NS, name string) (i int) {
		n.Do(t, func() error {
			l, err := netlink.LinkByName(name)
			if err == nil {
				i = l.Attrs().Index
			}
			return err
		})
		return i
	}
	if index(host, "hc") != index(b, "x") || index(c, "eth0") != index(b, "eth0") {
		t.Fatalf("setup: hc %d, b's x %d; c's eth0 %d, b's eth0 %d: want the same indexes", index(host, "hc"), index(b, "x"), index(c, "eth0"), index(b, "eth0"))
	}
	for _, tc := range []struct {
		pod  *nstest.NS
		want string
	}{{a, "ha"}, {c, "hc"}, {b, ""}} {
		var got string
		host.Do(t, func() (err error) { got, err = HostEnd(tc.pod.Path, "eth0"); return err })
		if got != tc.want {
			t.Errorf("HostEnd(%s, eth0) = %q, want %q", tc.pod.Name, got, tc.want)
		}
	}
}
