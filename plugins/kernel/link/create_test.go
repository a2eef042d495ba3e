package link_test

import (
	"net"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/test/nstest"
)

// CreateVeth leaves the host end up, enslaved to its bridge, in its port's
// link group and with its alias; the pod end in the pod's namespace.
// CreateIFB leaves the IFB up, in the group given and with its alias, and
// reuses an IFB of its name.
func TestCreateVethAndIFB(t *testing.T) {
	host, pod := nstest.New(t), nstest.New(t)
	podFd := pod.Fd(t)
	host.Do(t, func() error { return netlink.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "ncbr"}}) })
	br := host.Link(t, "ncbr")
	host.Do(t, func() error {
		h, err := link.CreateVeth(link.VethPair{HostName: "ncv", PodName: "eth1", PodNSFd: podFd, MTU: 1400,
			MasterIndex: br.Attrs().Index, Alias: "netclass c1/eth1"})
		if err != nil {
			return err
		}
		if h.Attrs().Name != "ncv" || h.Attrs().Index == 0 || h.Attrs().HardwareAddr == nil {
			t.Errorf("CreateVeth returned %+v, want the host end as read", h.Attrs())
		}
		for range 2 { // the second time, the IFB exists
			if _, err := link.CreateIFB("ncq", 1400, "netclass egress of ncv", link.PortGroup(h.Attrs().Index)); err != nil {
				return err
			}
		}
		return nil
	})
	v, ifb := host.Link(t, "ncv"), host.Link(t, "ncq")
	for _, c := range []struct {
		l      netlink.Link
		master int
		alias  string
	}{{v, br.Attrs().Index, "netclass c1/eth1"}, {ifb, 0, "netclass egress of ncv"}} {
		a := c.l.Attrs()
		if a.MasterIndex != c.master || a.Alias != c.alias || a.Group != link.PortGroup(v.Attrs().Index) ||
			a.Flags&net.FlagUp == 0 || a.MTU != 1400 {
			t.Errorf("%s: master %d, alias %q, group %#x, flags %v, mtu %d; want master %d, alias %q, group %#x, up, mtu 1400",
				a.Name, a.MasterIndex, a.Alias, a.Group, a.Flags, a.MTU, c.master, c.alias, link.PortGroup(v.Attrs().Index))
		}
	}
	if !pod.HasLink(t, "eth1") {
		t.Error("the pod end is not in the pod's namespace")
	}
}

// A bridge EnsureBridge creates keeps its MAC when ports come and go (an
// unset bridge MAC follows the lowest of its ports'), and is tagged.
func TestEnsureBridgeFixesItsMAC(t *testing.T) {
	host := nstest.New(t)
	var before net.HardwareAddr
	host.Do(t, func() error {
		br, err := link.EnsureBridge(link.BridgeSpec{Name: "ncbr7", Owner: "red"})
		if err != nil {
			return err
		}
		before = br.Attrs().HardwareAddr
		if !link.Tagged(br) {
			t.Error("the bridge netclass made is not tagged")
		}
		low := netlink.LinkAttrs{Name: "port0", HardwareAddr: net.HardwareAddr{0x02, 0, 0, 0, 0, 1}, MasterIndex: br.Attrs().Index}
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: low, PeerName: "port0p"})
	})
	if got := host.Link(t, "ncbr7").Attrs().HardwareAddr; got.String() != before.String() {
		t.Errorf("the bridge's MAC went from %s to %s with a port of a lower MAC", before, got)
	}
}
