//go:build vmtest

package guest_test

import (
	"net"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/netclass-dev/netclass/test/vm/guest"
)

// hostA and hostB are TEST-NET-1 addresses, only ever assigned inside the namespaces these
// tests create.
func hostA() *net.IPNet { return &net.IPNet{IP: net.IPv4(192, 0, 2, 1), Mask: net.CIDRMask(24, 32)} }
func hostB() *net.IPNet { return &net.IPNet{IP: net.IPv4(192, 0, 2, 2), Mask: net.CIDRMask(24, 32)} }

func TestInVM(t *testing.T) {
	if !guest.InVM() {
		t.Fatal("InVM() = false under the VM harness: NETCLASS_VM=1 did not reach the test")
	}
}

func TestRequireFindsEveryFeatureInTheVM(t *testing.T) {
	guest.Require(t, guest.VLAN, guest.BridgeVLANFiltering, guest.TCFlower, guest.TCPolice,
		guest.TCPedit, guest.TCSkbedit, guest.Dummy, guest.IPVlan, guest.NetdevsimSRIOV, guest.FQCodel, guest.Cake)
}

func TestVLANOnVethCarriesPing(t *testing.T) {
	guest.Require(t, guest.VLAN)
	a, b := guest.NewNetNS(t), guest.NewNetNS(t)
	ha, hb := handle(t, a), handle(t, b)
	vethPair(t, ha, "a0", b, "b0")
	va := addLink(t, ha, &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "a0.100", ParentIndex: linkIndex(t, ha, "a0")}, VlanId: 100})
	vb := addLink(t, hb, &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "b0.100", ParentIndex: linkIndex(t, hb, "b0")}, VlanId: 100})
	addrUp(t, ha, va, hostA())
	addrUp(t, hb, vb, hostB())

	if err := ping(a, hostB().IP, 56, 5*time.Second); err != nil {
		t.Fatalf("ping %s over a0.100 -> b0.100: %v", hostB().IP, err)
	}
	got, err := hb.LinkByName("b0.100")
	if err != nil {
		t.Fatalf("read back b0.100: %v", err)
	}
	if v, ok := got.(*netlink.Vlan); !ok || v.VlanId != 100 {
		t.Fatalf("b0.100 reads back as %#v, want an 802.1Q link with id 100", got)
	}
	if rx := got.Attrs().Statistics.RxPackets; rx == 0 {
		t.Fatalf("b0.100 received no packets although the ping was answered")
	}
}

func TestBridgeVLANFiltering(t *testing.T) {
	guest.Require(t, guest.BridgeVLANFiltering)
	h := handle(t, guest.NewNetNS(t))
	on := true
	br := addLink(t, h, &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "br0"}, VlanFiltering: &on})
	port := addLink(t, h, &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "p0"}, PeerName: "p1"})
	if err := h.LinkSetMaster(port, br); err != nil {
		t.Fatalf("enslave p0 to br0: %v", err)
	}
	if err := h.BridgeVlanAdd(port, 100, true, true, false, true); err != nil {
		t.Fatalf("bridge vlan add vid 100 pvid untagged dev p0: %v", err)
	}
	if err := h.BridgeVlanAdd(port, 200, false, false, false, true); err != nil {
		t.Fatalf("bridge vlan add vid 200 dev p0: %v", err)
	}

	got, err := h.LinkByName("br0")
	if err != nil {
		t.Fatalf("read back br0: %v", err)
	}
	if b, ok := got.(*netlink.Bridge); !ok || b.VlanFiltering == nil || !*b.VlanFiltering {
		t.Fatalf("br0 reads back as %#v, want vlan_filtering on", got)
	}
	vlans, err := h.BridgeVlanList()
	if err != nil {
		t.Fatalf("bridge vlan show: %v", err)
	}
	want := map[uint16]uint16{100: nl.BRIDGE_VLAN_INFO_PVID | nl.BRIDGE_VLAN_INFO_UNTAGGED, 200: 0}
	for _, v := range vlans[int32(port.Attrs().Index)] {
		if flags, ok := want[v.Vid]; ok && v.Flags == flags {
			delete(want, v.Vid)
		}
	}
	if len(want) > 0 {
		t.Fatalf("p0's VLANs read back as %v; missing vid->flags %v", vlans[int32(port.Attrs().Index)], want)
	}
}

func TestTCFlowerPolice(t *testing.T) {
	guest.Require(t, guest.TCFlower, guest.TCPolice)
	a, b := guest.NewNetNS(t), guest.NewNetNS(t)
	ha, hb := handle(t, a), handle(t, b)
	vethPair(t, ha, "a0", b, "b0")
	addrUp(t, ha, link(t, ha, "a0"), hostA())
	addrUp(t, hb, link(t, hb, "b0"), hostB())
	if err := ping(a, hostB().IP, 1000, 5*time.Second); err != nil {
		t.Fatalf("a 1000-byte ping before any filter: %v", err)
	}

	// Police ICMP to B: packets above 300 bytes exceed and are dropped, smaller ones conform.
	police := netlink.NewPoliceAction()
	police.Rate, police.Burst, police.Mtu = 125000, 64000, 300
	police.ExceedAction, police.NotExceedAction = netlink.TC_POLICE_SHOT, netlink.TC_POLICE_OK
	icmp := nl.IPPROTO_ICMP
	b0 := link(t, hb, "b0")
	addIngress(t, hb, b0)
	flower := &netlink.Flower{
		FilterAttrs: netlink.FilterAttrs{LinkIndex: b0.Attrs().Index, Parent: netlink.HANDLE_MIN_INGRESS, Priority: 1, Protocol: unix.ETH_P_IP},
		EthType:     unix.ETH_P_IP, IPProto: &icmp, DestIP: hostB().IP, DestIPMask: hostB().Mask,
		Actions: []netlink.Action{police},
	}
	if err := hb.FilterAdd(flower); err != nil {
		t.Fatalf("tc filter add dev b0 ingress flower ip_proto icmp action police: %v", err)
	}
	checkFlowerPolice(t, hb, b0)

	if err := ping(a, hostB().IP, 56, 5*time.Second); err != nil {
		t.Fatalf("a 56-byte ping conforms to the policer and must pass: %v", err)
	}
	if err := ping(a, hostB().IP, 1000, time.Second); err == nil {
		t.Fatalf("a 1000-byte ping exceeds the policer's 300-byte mtu and must be dropped, but was answered")
	}
}

func checkFlowerPolice(t *testing.T, h *netlink.Handle, l netlink.Link) {
	t.Helper()
	filters, err := h.FilterList(l, netlink.HANDLE_MIN_INGRESS)
	if err != nil {
		t.Fatalf("tc filter show dev b0 ingress: %v", err)
	}
	for _, f := range filters {
		fl, ok := f.(*netlink.Flower)
		if !ok || fl.IPProto == nil || *fl.IPProto != nl.IPPROTO_ICMP {
			continue
		}
		for _, a := range fl.Actions {
			if p, ok := a.(*netlink.PoliceAction); ok && p.Rate == 125000 && p.Burst > 0 && p.ExceedAction == netlink.TC_POLICE_SHOT {
				return
			}
		}
	}
	t.Fatalf("no flower filter matching ICMP with the police action read back from b0: %#v", filters)
}

func TestNetdevsimVFSettings(t *testing.T) {
	guest.Require(t, guest.NetdevsimSRIOV)
	pf := guest.Netdevsim(t, 2)
	if pf.VFs != 2 {
		t.Fatalf("Netdevsim(t, 2) returned %+v, want 2 VFs", pf)
	}
	n := guest.NewNetNS(t)
	moveLink(t, pf.Name, n)
	h := handle(t, n)
	l := link(t, h, pf.Name)

	mac, _ := net.ParseMAC("02:00:00:00:10:01")
	must(t, "vf 0 mac", h.LinkSetVfHardwareAddr(l, 0, mac))
	must(t, "vf 0 vlan 100 qos 3", h.LinkSetVfVlanQos(l, 0, 100, 3))
	must(t, "vf 0 min_tx_rate 10 max_tx_rate 100", h.LinkSetVfRate(l, 0, 10, 100))
	must(t, "vf 0 spoofchk off", h.LinkSetVfSpoofchk(l, 0, false))
	must(t, "vf 0 trust on", h.LinkSetVfTrust(l, 0, true))
	must(t, "vf 0 state disable", h.LinkSetVfState(l, 0, netlink.VF_LINK_STATE_DISABLE))
	must(t, "vf 1 spoofchk on", h.LinkSetVfSpoofchk(l, 1, true))

	vfs := link(t, h, pf.Name).Attrs().Vfs
	if len(vfs) != 2 {
		t.Fatalf("%s reads back %d VFs, want 2", pf.Name, len(vfs))
	}
	got := vfs[0]
	want := netlink.VfInfo{ID: 0, Mac: mac, Vlan: 100, Qos: 3, MinTxRate: 10, MaxTxRate: 100, Spoofchk: false, Trust: 1, LinkState: netlink.VF_LINK_STATE_DISABLE}
	if got.Mac.String() != want.Mac.String() || got.Vlan != want.Vlan || got.Qos != want.Qos ||
		got.MinTxRate != want.MinTxRate || got.MaxTxRate != want.MaxTxRate || got.Spoofchk != want.Spoofchk ||
		got.Trust != want.Trust || got.LinkState != want.LinkState {
		t.Fatalf("vf 0 reads back as %+v, want %+v", got, want)
	}
	if !vfs[1].Spoofchk || vfs[1].Vlan != 0 {
		t.Fatalf("vf 1 reads back as %+v, want spoofchk on and no vlan", vfs[1])
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// handle is a netlink handle working in n.
func handle(t *testing.T, n ns.NetNS) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(netns.NsHandle(n.Fd()))
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", n.Path(), err)
	}
	t.Cleanup(h.Close)
	return h
}

func addLink(t *testing.T, h *netlink.Handle, l netlink.Link) netlink.Link {
	t.Helper()
	if err := h.LinkAdd(l); err != nil {
		t.Fatalf("add %s link %s: %v", l.Type(), l.Attrs().Name, err)
	}
	return link(t, h, l.Attrs().Name)
}

func link(t *testing.T, h *netlink.Handle, name string) netlink.Link {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("find link %s: %v", name, err)
	}
	return l
}

func linkIndex(t *testing.T, h *netlink.Handle, name string) int {
	t.Helper()
	return link(t, h, name).Attrs().Index
}

// vethPair adds a veth in h's namespace whose peer lives in peerNS.
func vethPair(t *testing.T, h *netlink.Handle, name string, peerNS ns.NetNS, peer string) {
	t.Helper()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer, PeerNamespace: netlink.NsFd(peerNS.Fd())}
	if err := h.LinkAdd(veth); err != nil {
		t.Fatalf("add veth %s with peer %s in %s: %v", name, peer, peerNS.Path(), err)
	}
	setUp(t, h, name)
	setUp(t, handle(t, peerNS), peer)
}

func setUp(t *testing.T, h *netlink.Handle, name string) {
	t.Helper()
	if err := h.LinkSetUp(link(t, h, name)); err != nil {
		t.Fatalf("set %s up: %v", name, err)
	}
}

func addrUp(t *testing.T, h *netlink.Handle, l netlink.Link, ip *net.IPNet) {
	t.Helper()
	if err := h.AddrAdd(l, &netlink.Addr{IPNet: ip}); err != nil {
		t.Fatalf("add %s to %s: %v", ip, l.Attrs().Name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		t.Fatalf("set %s up: %v", l.Attrs().Name, err)
	}
}

func addIngress(t *testing.T, h *netlink.Handle, l netlink.Link) {
	t.Helper()
	q := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_INGRESS, Handle: netlink.MakeHandle(0xffff, 0)}}
	if err := h.QdiscAdd(q); err != nil {
		t.Fatalf("tc qdisc add dev %s ingress: %v", l.Attrs().Name, err)
	}
}

// moveLink moves a link of the test's own (initial) namespace into n.
func moveLink(t *testing.T, name string, n ns.NetNS) {
	t.Helper()
	l, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatalf("find link %s: %v", name, err)
	}
	if err := netlink.LinkSetNsFd(l, int(n.Fd())); err != nil {
		t.Fatalf("move %s to %s: %v", name, n.Path(), err)
	}
}
