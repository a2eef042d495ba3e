// Package portguard is the security of a pod's port on a host bridge, the
// part netclass-bridge, netclass-vxlan and netclass-vlan (bridged) share
// with netclass-dra's agent (and, for an interface without a host end, its
// guard in the pod: SecureInPod): the port's guard (plugins/kernel/nft: what the
// pod may send: its MAC, its addresses, no router advertisements, no
// tagged frames; closed until netclass-dra opens it) and, on DEL, the port's
// NetworkPolicy, which the agent keeps on the host side of the port. All of
// it lives in the host's namespace, out of the pod's reach.
package portguard

import (
	"errors"
	"fmt"
	"net/netip"

	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
)

// Port is a pod's interface whose host end is a port of a host bridge.
type Port struct {
	PodNS, IfName string
	HostIf        string
}

// GuardOf returns the guard of the port: the pod end's MAC and link-local
// addresses, read from the pod, and the addresses IPAM gave it (ips; none:
// sources are not checked, the pod picks its own).
func GuardOf(p Port, ips []netip.Addr) (nft.Guard, error) {
	var g nft.Guard
	err := netns.Do(p.PodNS, func() error {
		l, err := link.ByName(p.IfName)
		if err != nil {
			return err
		}
		g.MAC = l.Attrs().HardwareAddr
		if len(ips) == 0 {
			return nil
		}
		lls, err := link.Addrs(l, true)
		for _, a := range lls {
			if a.IsLinkLocalUnicast() {
				g.V6 = append(g.V6, a)
			}
		}
		return err
	})
	if err != nil {
		return g, fmt.Errorf("read %q in %s: %w", p.IfName, p.PodNS, err)
	}
	g.CheckIPs = len(ips) > 0
	for _, a := range ips {
		if a.Is4() {
			g.V4 = append(g.V4, a)
		} else {
			g.V6 = append(g.V6, a)
		}
	}
	return g, nil
}

// ResultIPs returns the addresses of a CNI result's IP configurations.
func ResultIPs(res *current.Result) []netip.Addr {
	var out []netip.Addr
	for _, ipc := range res.IPs {
		if a, ok := netip.AddrFromSlice(ipc.Address.IP); ok {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// Secure puts the port under the guard ps asks for, once ADD configured
// the pod end with res; nothing is done without ps. A port that starts
// closed is closed before it is guarded, and its bridge hands its IP
// traffic to the host's inet hooks, where its NetworkPolicy will be.
func Secure(ps *netconf.PortSecurity, p Port, bridge netlink.Link, res *current.Result) error {
	if ps == nil || !ps.SpoofCheck {
		return nil
	}
	if ps.StartClosed {
		if err := BridgeNetfilter(bridge); err != nil {
			return fmt.Errorf("portSecurity.startClosed: %w", err)
		}
	}
	g, err := GuardOf(p, ResultIPs(res))
	if err != nil {
		return err
	}
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	if err := nft.InstallGuard(c, p.HostIf, g, ps.StartClosed); err != nil {
		return fmt.Errorf("guard port %q: %w", p.HostIf, err)
	}
	return nil
}

// BridgeNetfilter hands the bridge's IP traffic to the host's inet hooks
// (where the port's NetworkPolicy is), loading br_netfilter first when it
// is a module not loaded yet: by asking the kernel (which runs the host's
// module loader, whatever container this runs in), then with modprobe.
func BridgeNetfilter(bridge netlink.Link) error {
	if !link.BridgeNetfilterLoaded() {
		c, err := nft.OpenCurrent()
		if err == nil {
			err = nft.RequestBridgeNetfilter(c)
		}
		if lerr := link.LoadBridgeNetfilter(); lerr != nil {
			return errors.Join(lerr, err)
		}
	}
	return link.BridgeNetfilter(bridge)
}

// Check verifies the port's guard against the attachment's result.
func Check(ps *netconf.PortSecurity, p Port, res *current.Result) error {
	if ps == nil || !ps.SpoofCheck {
		return nil
	}
	g, err := GuardOf(p, ResultIPs(res))
	if err != nil {
		return err
	}
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return nft.CheckGuard(c, p.HostIf, g)
}

// Remove deletes the host end's guard and host-side NetworkPolicy, whatever
// the configuration says (the agent may have added them to an older
// attachment); none is success. It needs only the host end's name.
func Remove(hostIf string) error {
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return errors.Join(nft.DeleteGuard(c, hostIf), nft.DeleteHostPolicy(c, hostIf))
}

// SecureInPod guards an interface without a host end (a VF, macvlan, a
// VLAN made in the pod) in its pod's namespace, at the interface's netdev
// hooks: what ps asks for, as Secure does for a bridged port. A pod with
// CAP_NET_ADMIN can remove it (README, "Security model").
func SecureInPod(ps *netconf.PortSecurity, podNS, ifname string, res *current.Result) error {
	err := inPod(ps, podNS, ifname, res, func(c *nftables.Conn, g nft.Guard) error { return nft.InstallPodGuard(c, ifname, g, ps.StartClosed) })
	if err != nil {
		return fmt.Errorf("guard %q in %s: %w", ifname, podNS, err)
	}
	return nil
}

// CheckInPod verifies the guard of an interface without a host end.
func CheckInPod(ps *netconf.PortSecurity, podNS, ifname string, res *current.Result) error {
	return inPod(ps, podNS, ifname, res, func(c *nftables.Conn, g nft.Guard) error { return nft.CheckPodGuard(c, ifname, g) })
}

// inPod runs fn on the interface's guard in its pod, when ps asks for one.
func inPod(ps *netconf.PortSecurity, podNS, ifname string, res *current.Result, fn func(*nftables.Conn, nft.Guard) error) error {
	if ps == nil || !ps.SpoofCheck {
		return nil
	}
	g, err := GuardOf(Port{PodNS: podNS, IfName: ifname}, ResultIPs(res))
	if err != nil {
		return err
	}
	return nft.InNamespace(podNS, func(c *nftables.Conn) error { return fn(c, g) })
}

// RemoveInPod deletes the guard of an interface without a host end; none,
// or no namespace any more, is success.
func RemoveInPod(podNS, ifname string) error {
	err := nft.InNamespace(podNS, func(c *nftables.Conn) error { return nft.DeletePodGuard(c, ifname) })
	if errors.Is(err, netns.ErrNotFound) {
		return nil
	}
	return err
}
