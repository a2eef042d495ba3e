// Package nodenetwork reports, in each NodeNetwork of this node, whether the
// node can carry its ClusterNetwork: the underlay device exists and is up,
// the local address is the node's, the MTU fits, the kernel supports the
// device type. Evaluation is pure over a Host; the Reporter applies the
// status with field manager netclass.dev.
package nodenetwork

import (
	"fmt"
	"net/netip"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netconf"
)

// Link is what the evaluation needs of a node device.
type Link struct {
	Name  string
	Up    bool
	MTU   int
	Addrs []netip.Addr
}

// Host answers questions about the node.
type Host interface {
	Link(name string) (Link, bool)
	// LinkWithAddress returns the device holding an address.
	LinkWithAddress(a netip.Addr) (Link, bool)
	// VLANSupported reports whether 802.1Q devices can be created.
	VLANSupported() bool
}

// Verdict is the status to report.
type Verdict struct {
	Ready        bool
	Reason       string
	Message      string
	Master       string
	LocalAddress string
	MTU          int
	// NodeIndex is the node's index (-1: none).
	NodeIndex int
	// Devices are the node devices kept for the ClusterNetwork's networks.
	Devices []string
}

// Node is what the evaluation knows of the node itself.
type Node struct {
	// InternalIP is the node's InternalIP: the device that carries it is
	// the underlay of a network that leaves master (and local) to the node.
	InternalIP netip.Addr
	// Index is the node's index (-1: not assigned yet), reported in the
	// status: it picks the node's address blocks.
	Index int
}

// Evaluate decides whether the node can carry the NodeNetwork. Options
// without master (nor, for VXLAN, local) run over the device that carries
// the node's InternalIP, from that address.
func Evaluate(nn *ncv1.NodeNetwork, host Host, node Node) Verdict {
	o := nn.Spec.Options
	switch {
	case o.VLAN != nil && o.VXLAN != nil:
		return fail(ncv1.ReasonInvalidConfig, "both vlan and vxlan options are set")
	case o.VLAN != nil:
		return vlan(o.VLAN, host, node)
	case o.VXLAN != nil:
		return vxlan(o.VXLAN, host, node)
	}
	return fail(ncv1.ReasonInvalidConfig, "neither vlan nor vxlan options are set")
}

// internalDevice is the device carrying the node's InternalIP.
func internalDevice(host Host, node Node) (Link, *Verdict) {
	if !node.InternalIP.IsValid() {
		v := fail(ncv1.ReasonMasterNotFound, "no master is configured and the node has no InternalIP to find its underlay device by")
		return Link{}, &v
	}
	l, ok := host.LinkWithAddress(node.InternalIP)
	if !ok {
		v := fail(ncv1.ReasonMasterNotFound, "no master is configured and no device of the node has its InternalIP %s", node.InternalIP)
		return Link{}, &v
	}
	if !l.Up {
		v := fail(ncv1.ReasonMasterDown, "%s, which has the node's InternalIP %s, is down", l.Name, node.InternalIP)
		return Link{}, &v
	}
	return l, nil
}

func fail(reason, format string, args ...any) Verdict {
	return Verdict{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

func vlan(o *ncv1.VLANOptions, host Host, node Node) Verdict {
	if !host.VLANSupported() {
		return fail(ncv1.ReasonKernelUnsupported, "the kernel has no 802.1Q VLAN support (module 8021q)")
	}
	var l Link
	var v *Verdict
	if o.Master == "" {
		l, v = internalDevice(host, node)
	} else {
		l, v = master(string(o.Master), host)
	}
	if v != nil {
		return *v
	}
	mtu := l.MTU
	if o.MTU != nil {
		if int(*o.MTU) > l.MTU {
			return fail(ncv1.ReasonMTUTooLarge, "mtu %d is larger than %s's %d", *o.MTU, l.Name, l.MTU)
		}
		mtu = int(*o.MTU)
	}
	return ready(l.Name, "", mtu)
}

func vxlan(o *ncv1.VXLANOptions, host Host, node Node) Verdict {
	var l Link
	var local netip.Addr
	switch {
	case o.Master != "":
		m, v := master(string(o.Master), host)
		if v != nil {
			return *v
		}
		l, local = m, underlayAddr(m, o)
		if !local.IsValid() {
			return fail(ncv1.ReasonLocalAddressNotFound, "%s has no address to carry VXLAN", m.Name)
		}
	case o.Local != "":
		a, err := netip.ParseAddr(string(o.Local))
		if err != nil {
			return fail(ncv1.ReasonInvalidConfig, "vxlan.local %q is not an IP address", o.Local)
		}
		m, ok := host.LinkWithAddress(a)
		if !ok {
			return fail(ncv1.ReasonLocalAddressNotFound, "no device of the node has the address %s", a)
		}
		if !m.Up {
			return fail(ncv1.ReasonMasterDown, "%s, which has %s, is down", m.Name, a)
		}
		l, local = m, a
	default:
		m, v := internalDevice(host, node)
		if v != nil {
			return *v
		}
		l, local = m, node.InternalIP
	}
	overhead := netconf.VXLANOverhead4
	if local.Is6() {
		overhead = netconf.VXLANOverhead6
	}
	mtu := l.MTU - overhead
	if o.MTU != nil {
		if int(*o.MTU) > mtu {
			return fail(ncv1.ReasonMTUTooLarge, "mtu %d is larger than %s's %d minus the VXLAN overhead %d", *o.MTU, l.Name, l.MTU, overhead)
		}
		mtu = int(*o.MTU)
	}
	return ready(l.Name, local.String(), mtu)
}

func master(name string, host Host) (Link, *Verdict) {
	l, ok := host.Link(name)
	if !ok {
		v := fail(ncv1.ReasonMasterNotFound, "the node has no device %q", name)
		return Link{}, &v
	}
	if !l.Up {
		v := fail(ncv1.ReasonMasterDown, "device %s is down", name)
		return Link{}, &v
	}
	return l, nil
}

// underlayAddr picks the master's address of the family the remotes or
// group use (IPv4 when they name none).
func underlayAddr(l Link, o *ncv1.VXLANOptions) netip.Addr {
	want6 := false
	for _, a := range append([]ncv1.IPAddress{o.Group}, o.Remotes...) {
		if ip, err := netip.ParseAddr(string(a)); err == nil {
			want6 = ip.Is6()
			break
		}
	}
	for _, a := range l.Addrs {
		if a.IsGlobalUnicast() && a.Is6() == want6 && (want6 || a.Is4()) {
			return a
		}
	}
	return netip.Addr{}
}

func ready(master, local string, mtu int) Verdict {
	return Verdict{Ready: true, Reason: ncv1.ReasonReady, Message: fmt.Sprintf("the node can carry the network over %s", master),
		Master: master, LocalAddress: local, MTU: mtu}
}
