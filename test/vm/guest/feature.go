package guest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Feature is a kernel feature a test can require.
type Feature int

// The features this machine's kernel lacks and Debian's stock kernel has.
const (
	VLAN                Feature = iota + 1 // 802.1Q VLAN devices
	BridgeVLANFiltering                    // bridge vlan_filtering and per-port VLANs
	TCFlower                               // tc flower classifier
	TCPolice                               // tc police action
	TCPedit                                // tc pedit action
	TCSkbedit                              // tc skbedit action
	Dummy                                  // dummy links
	IPVlan                                 // ipvlan links
	NetdevsimSRIOV                         // netdevsim devices with SR-IOV VFs (see Netdevsim)
	FQCodel                                // the fq_codel qdisc
	Cake                                   // the cake qdisc
)

func (f Feature) String() string {
	switch f {
	case VLAN:
		return "VLAN (802.1Q devices)"
	case BridgeVLANFiltering:
		return "BridgeVLANFiltering (bridge vlan_filtering)"
	case TCFlower:
		return "TCFlower (tc flower classifier)"
	case TCPolice:
		return "TCPolice (tc police action)"
	case TCPedit:
		return "TCPedit (tc pedit action)"
	case TCSkbedit:
		return "TCSkbedit (tc skbedit action)"
	case Dummy:
		return "Dummy (dummy links)"
	case IPVlan:
		return "IPVlan (ipvlan links)"
	case NetdevsimSRIOV:
		return "NetdevsimSRIOV (netdevsim SR-IOV devices)"
	case FQCodel:
		return "FQCodel (the fq_codel qdisc)"
	case Cake:
		return "Cake (the cake qdisc)"
	}
	return fmt.Sprintf("Feature(%d)", int(f))
}

// Require fails the test, never skips it, when the running kernel lacks one of the features.
// Each probe works in a network namespace of its own, deleted before Require returns.
func Require(t testing.TB, features ...Feature) {
	t.Helper()
	var missing []string
	for _, f := range features {
		if err := f.probe(); err != nil {
			missing = append(missing, fmt.Sprintf("%s: %v", f, err))
		}
	}
	if len(missing) == 0 {
		return
	}
	where := "this kernel (" + kernelRelease() + ")"
	if InVM() {
		where = "the VM's kernel (" + kernelRelease() + ")"
	}
	t.Fatalf("%s lacks features this test needs:\n  %s\nrun this test through the VM harness: make test-vm",
		where, strings.Join(missing, "\n  "))
}

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown release"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// probe tries the feature out; an error says why it is not usable.
func (f Feature) probe() error {
	if f == NetdevsimSRIOV {
		return probeNetdevsim()
	}
	n, err := newNetNS()
	if err != nil {
		return fmt.Errorf("create a network namespace for the probe: %w", err)
	}
	err = n.Do(func(ns.NetNS) error { return f.probeHere() })
	return errors.Join(err, deleteNetNS(n))
}

// probeHere runs in the probe's own network namespace.
func (f Feature) probeHere() error {
	switch f {
	case Dummy:
		return linkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "probe0"}})
	case BridgeVLANFiltering:
		return probeBridgeVLANFiltering()
	}
	port, err := probeVeth()
	if err != nil {
		return err
	}
	switch f {
	case VLAN:
		return linkAdd(&netlink.Vlan{LinkAttrs: child("probe0.10", port), VlanId: 10})
	case IPVlan:
		return linkAdd(&netlink.IPVlan{LinkAttrs: child("probe-ipvl", port), Mode: netlink.IPVLAN_MODE_L2})
	case TCFlower:
		proto := nl.IPPROTO_ICMP
		return ingressFilter(port, &netlink.Flower{EthType: unix.ETH_P_IP, IPProto: &proto})
	case TCPolice:
		police := netlink.NewPoliceAction()
		police.Rate, police.Burst, police.ExceedAction = 125000, 10000, netlink.TC_POLICE_SHOT
		return ingressFilter(port, matchAll(police))
	case TCPedit:
		pedit := netlink.NewPeditAction()
		pedit.DstMacAddr = port.Attrs().HardwareAddr
		return ingressFilter(port, matchAll(pedit))
	case TCSkbedit:
		skbedit, prio := netlink.NewSkbEditAction(), uint32(1)
		skbedit.Priority = &prio
		return ingressFilter(port, matchAll(skbedit))
	case FQCodel:
		return rootQdisc(&netlink.FqCodel{QdiscAttrs: rootOf(port)})
	case Cake:
		return rootQdisc(&netlink.GenericQdisc{QdiscAttrs: rootOf(port), QdiscType: "cake"})
	}
	return fmt.Errorf("no probe for feature %d", int(f))
}

func linkAdd(l netlink.Link) error {
	if err := netlink.LinkAdd(l); err != nil {
		return fmt.Errorf("add %s link %s: %w", l.Type(), l.Attrs().Name, err)
	}
	return nil
}

func child(name string, parent netlink.Link) netlink.LinkAttrs {
	return netlink.LinkAttrs{Name: name, ParentIndex: parent.Attrs().Index}
}

// probeVeth adds a veth pair and returns its first end.
func probeVeth() (netlink.Link, error) {
	if err := linkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "probe-a"}, PeerName: "probe-b"}); err != nil {
		return nil, err
	}
	l, err := netlink.LinkByName("probe-a")
	if err != nil {
		return nil, fmt.Errorf("find link probe-a: %w", err)
	}
	return l, nil
}

func probeBridgeVLANFiltering() error {
	on := true
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "probe-br"}, VlanFiltering: &on}
	if err := linkAdd(br); err != nil {
		return err
	}
	port, err := probeVeth()
	if err != nil {
		return err
	}
	if err := netlink.LinkSetMaster(port, br); err != nil {
		return fmt.Errorf("enslave %s to %s: %w", port.Attrs().Name, br.Name, err)
	}
	if err := netlink.BridgeVlanAdd(port, 10, true, true, false, true); err != nil {
		return fmt.Errorf("add vlan 10 to bridge port %s: %w", port.Attrs().Name, err)
	}
	got, err := netlink.LinkByName(br.Name)
	if err != nil {
		return fmt.Errorf("read back bridge %s: %w", br.Name, err)
	}
	if b, ok := got.(*netlink.Bridge); !ok || b.VlanFiltering == nil || !*b.VlanFiltering {
		return fmt.Errorf("bridge %s does not report vlan_filtering on", br.Name)
	}
	return nil
}

func rootOf(l netlink.Link) netlink.QdiscAttrs {
	return netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Parent: netlink.HANDLE_ROOT, Handle: netlink.MakeHandle(1, 0)}
}

func rootQdisc(q netlink.Qdisc) error {
	if err := netlink.QdiscAdd(q); err != nil {
		return fmt.Errorf("add %s qdisc: %w", q.Type(), err)
	}
	return nil
}

// matchAll is a u32 filter (a classifier this machine has) matching every packet.
func matchAll(a netlink.Action) *netlink.U32 {
	return &netlink.U32{
		Sel:     &netlink.TcU32Sel{Flags: nl.TC_U32_TERMINAL, Keys: []netlink.TcU32Key{{}}},
		Actions: []netlink.Action{a},
	}
}

// ingressFilter adds an ingress qdisc on link and the filter on it.
func ingressFilter(link netlink.Link, f netlink.Filter) error {
	q := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.HANDLE_INGRESS, Handle: netlink.MakeHandle(0xffff, 0)}}
	if err := netlink.QdiscAdd(q); err != nil {
		return fmt.Errorf("add ingress qdisc on %s: %w", link.Attrs().Name, err)
	}
	*f.Attrs() = netlink.FilterAttrs{LinkIndex: link.Attrs().Index, Parent: netlink.MakeHandle(0xffff, 0), Priority: 1, Protocol: unix.ETH_P_ALL}
	if err := netlink.FilterAdd(f); err != nil {
		return fmt.Errorf("add %s filter on %s: %w", f.Type(), link.Attrs().Name, err)
	}
	return nil
}
