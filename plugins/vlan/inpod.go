package vlan

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/portguard"
)

// The linkInContainer mode: the VLAN is a sub-interface, in the pod, of a
// master inside the pod. Records without a bridge made before VLANs were
// bridged on the host (a sub-interface created on the host and moved into
// the pod) are torn down the same way.

// masterInPod finds the parent link inside the pod. A missing master or an
// MTU above the master's is a configuration error naming the field.
func masterInPod(c *netconf.VLAN, podNS string) (netlink.Link, error) {
	var m netlink.Link
	err := netns.Do(podNS, func() (err error) { m, err = link.ByName(c.Master); return err })
	if err != nil {
		return nil, attach.Invalid("master: %v", err)
	}
	if c.MTU > m.Attrs().MTU {
		return nil, attach.Invalid("mtu: %d exceeds the MTU of master %q (%d)", c.MTU, c.Master, m.Attrs().MTU)
	}
	return m, nil
}

func addInPod(ctx context.Context, c *netconf.VLAN, args *skel.CmdArgs, undo *attach.Undo) (*current.Result, error) {
	m, err := masterInPod(c, args.Netns)
	if err != nil {
		return nil, err
	}
	rec := &attach.Record{Network: c.Name, Plugin: netconf.TypeVLAN, ContainerID: args.ContainerID,
		IfName: args.IfName, NetNS: args.Netns, Config: c.Raw}
	if err := store(c).Put(rec); err != nil {
		return nil, err
	}
	undo.Push(func() error { return store(c).Delete(c.Name, args.ContainerID, args.IfName) })
	res, err := allocateAndCreate(ctx, c, args, m, undo)
	if err != nil {
		return nil, err
	}
	if err := configure(args, res); err != nil {
		return nil, err
	}
	rec.Addressed(res)
	if err := store(c).Put(rec); err != nil {
		return nil, err
	}
	if c.PortSecurity != nil {
		undo.Push(func() error { return portguard.RemoveInPod(args.Netns, args.IfName) })
		if err := portguard.SecureInPod(c.PortSecurity, args.Netns, args.IfName, res); err != nil {
			return nil, err
		}
	}
	return res, applyPodPCP(c, args.Netns, args.IfName)
}

// allocateAndCreate runs IPAM while the VLAN link is created in the pod.
func allocateAndCreate(ctx context.Context, c *netconf.VLAN, args *skel.CmdArgs, m netlink.Link, undo *attach.Undo) (*current.Result, error) {
	var (
		res                *current.Result
		ipamErr, createErr error
	)
	err := attach.WithIPAM(ipamOf(c),
		func() error { res, ipamErr = ipamOf(c).Add(ctx); return ipamErr },
		func() error { createErr = createInPod(c, args, m); return createErr },
	)
	if ipamErr == nil {
		undo.Push(func() error { return ipamOf(c).Del(ctx) })
	}
	if bridgeport.Created(nil, createErr) {
		undo.Push(func() error { return removeLink(args.Netns, args.IfName) })
	}
	if err != nil {
		return nil, err
	}
	res.Interfaces = []*current.Interface{{Name: args.IfName, Sandbox: args.Netns}}
	for _, ipc := range res.IPs {
		ipc.Interface = current.Int(0)
	}
	return res, nil
}

func createInPod(c *netconf.VLAN, args *skel.CmdArgs, m netlink.Link) error {
	spec := link.VLANSpec{Name: args.IfName, ParentIndex: m.Attrs().Index, VLANID: c.VLANID, MTU: c.MTU, TargetNSFd: -1}
	return netns.Do(args.Netns, func() error { return link.CreateVLAN(spec) })
}

// configure brings the link up with its addresses and routes and records
// its MAC in the result.
func configure(args *skel.CmdArgs, res *current.Result) error {
	return netns.Do(args.Netns, func() error {
		if len(res.IPs) > 0 {
			if err := ipam.ConfigureIface(args.IfName, res); err != nil {
				return err
			}
		}
		l, err := link.ByName(args.IfName)
		if err != nil {
			return err
		}
		res.Interfaces[0].Mac = l.Attrs().HardwareAddr.String()
		return link.Up(l)
	})
}

// removeLink deletes the pod's VLAN link and its priority table; a link or
// namespace already gone is success.
func removeLink(netnsPath, ifname string) error {
	err := netns.Do(netnsPath, func() error { return link.Delete(ifname) })
	if err != nil && !errors.Is(err, netns.ErrNotFound) {
		return fmt.Errorf("delete %q in %s: %w", ifname, netnsPath, err)
	}
	return errors.Join(deletePodPCP(netnsPath, ifname), portguard.RemoveInPod(netnsPath, ifname))
}

// checkInPod verifies the pod's VLAN link (id, MAC, state), its addresses
// and routes against prevResult.
func checkInPod(c *netconf.VLAN, args *skel.CmdArgs, prev *current.Result) error {
	var want *current.Interface
	for _, i := range prev.Interfaces {
		if i.Name == args.IfName && i.Sandbox != "" {
			want = i
		}
	}
	if want == nil {
		return fmt.Errorf("prevResult has no interface %q in a sandbox", args.IfName)
	}
	err := netns.Do(args.Netns, func() error {
		l, err := link.ByName(args.IfName)
		if err != nil {
			return err
		}
		v, ok := l.(*netlink.Vlan)
		switch {
		case !ok:
			return fmt.Errorf("%q is a %s, not a vlan", args.IfName, l.Type())
		case v.VlanId != c.VLANID:
			return fmt.Errorf("%q has VLAN id %d, want %d", args.IfName, v.VlanId, c.VLANID)
		case want.Mac != "" && l.Attrs().HardwareAddr.String() != want.Mac:
			return fmt.Errorf("%q has MAC %s, want %s", args.IfName, l.Attrs().HardwareAddr, want.Mac)
		case l.Attrs().Flags&1 == 0:
			return fmt.Errorf("%q is down", args.IfName)
		}
		if err := link.CheckPriorityPCP(v); err != nil {
			return err
		}
		if err := ip.ValidateExpectedInterfaceIPs(args.IfName, prev.IPs); err != nil {
			return err
		}
		return ip.ValidateExpectedRoute(prev.Routes)
	})
	if err != nil {
		return err
	}
	if err := portguard.CheckInPod(c.PortSecurity, args.Netns, args.IfName, prev); err != nil {
		return fmt.Errorf("port security: %w", err)
	}
	return nft.InNamespace(args.Netns, func(conn *nftables.Conn) error { return nft.CheckPCP(conn, args.IfName, c.PCP) })
}
