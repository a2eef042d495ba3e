//go:build vmtest

package nodedevices_test

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/nodedevices"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/vm/guest"
)

// vlanNet is an offered netclass-vlan network on the node's ul0.
func vlanNet(name string, id int, extra string) network.Network {
	return network.Network{
		Ref:    attachment.NetworkRef{Kind: "PodNetwork", Name: name},
		Type:   "netclass-vlan",
		Config: []byte(fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"netclass-vlan","master":"ul0","vlanId":%d%s}`, name, id, extra)),
	}
}

// TestEngineSetsUpVLANs: the VLAN's sub-interface of master and its bridge
// appear with the network, tagged as the node daemon's, the sub-interface a
// port of the bridge; they stay while a pod uses them after the network
// went, and go with the last pod. A linkInContainer VLAN has no node
// devices.
func TestEngineSetsUpVLANs(t *testing.T) {
	guest.Require(t, guest.VLAN)
	ns := node(t)
	e := &nodedevices.Engine{DataDirs: []string{t.TempDir()}}
	c := netconf.VLAN{Master: "ul0", VLANID: 100}
	br, dev := c.BridgeName(), c.DeviceName()
	res, err := sync(t, ns, e, vlanNet("blue", 100, ""), vlanNet("inpod", 200, `,"linkInContainer":true`))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Devices["blue"]; !slices.Equal(got, []string{br, dev}) || len(res.Devices) != 1 {
		t.Fatalf("devices %v, want blue: [%s %s] only", res.Devices, br, dev)
	}
	for _, name := range []string{br, dev} {
		if l := ns.Link(t, name); l.Attrs().Alias != link.NodeOwnerAlias("blue") {
			t.Errorf("%s has alias %q, want the node daemon's tag for blue", name, l.Attrs().Alias)
		}
	}
	v, ok := ns.Link(t, dev).(*netlink.Vlan)
	switch {
	case !ok:
		t.Fatalf("%s is not a vlan", dev)
	case v.VlanId != 100 || v.ParentIndex != ns.Link(t, "ul0").Attrs().Index:
		t.Errorf("%s: VLAN %d on index %d, want 100 on ul0", dev, v.VlanId, v.ParentIndex)
	case v.MasterIndex != ns.Link(t, br).Attrs().Index:
		t.Errorf("%s is not a port of %s", dev, br)
	}
	if err := link.CheckPriorityPCP(v); err != nil {
		t.Error(err)
	}
	checkPCP(t, ns, dev, netconf.DefaultPCPTable())
	// resyncing changes nothing; a pcpMap edited changes the map in place
	before := v.Attrs().Index
	if _, err := sync(t, ns, e, vlanNet("blue", 100, "")); err != nil {
		t.Fatal(err)
	}
	if _, err := sync(t, ns, e, vlanNet("blue", 100, `,"pcpMap":{"46":6}`)); err != nil {
		t.Fatal(err)
	}
	if after := ns.Link(t, dev).Attrs().Index; after != before {
		t.Fatalf("the sub-interface was re-created (index %d → %d)", before, after)
	}
	checkPCP(t, ns, dev, netconf.PCPTable{46: 6})
	// a pod is a port of the bridge: the network goes, the devices stay
	ns.Do(t, func() error {
		attrs := netlink.NewLinkAttrs()
		attrs.Name, attrs.MasterIndex = "pod0", ns.Link(t, br).Attrs().Index
		return netlink.LinkAdd(&netlink.Veth{LinkAttrs: attrs, PeerName: "pod0p"})
	})
	if res, err := sync(t, ns, e); err != nil || len(res.Removed) != 0 {
		t.Fatalf("with a pod still on the bridge: removed %v, %v", res.Removed, err)
	}
	ns.Do(t, func() error { return link.Delete("pod0") })
	res, err = sync(t, ns, e)
	if err != nil {
		t.Fatal(err)
	}
	if ns.HasLink(t, br) || ns.HasLink(t, dev) || len(res.Removed) != 2 {
		t.Fatalf("devices of a network that is gone, with no pod left: still there (removed %v)", res.Removed)
	}
	if !ns.HasLink(t, "ul0") {
		t.Fatal("the master went with its sub-interface")
	}
	if out, _ := exec.Command("ip", "netns", "exec", ns.Name, "nft", "list", "tables").CombinedOutput(); strings.Contains(string(out), nft.PCPTable(dev)) {
		t.Fatalf("the sub-interface's PCP table outlived it:\n%s", out)
	}
}

// checkPCP verifies the priority table of the node's VLAN device.
func checkPCP(t *testing.T, ns *nstest.NS, dev string, want netconf.PCPTable) {
	t.Helper()
	ns.Do(t, func() error {
		c, err := nft.OpenCurrent()
		if err != nil {
			return err
		}
		return nft.CheckPCP(c, dev, want)
	})
}
