package bridge

import (
	"context"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

func cmdAdd(args *skel.CmdArgs) error {
	c, err := netconf.ParseBridge(args.StdinData)
	if err != nil {
		return err
	}
	var undo attach.Undo
	res, err := add(context.Background(), c, args, &undo)
	if err != nil {
		return attach.Internal(err, undo.Run())
	}
	return attach.Print(res, c.CNIVersion)
}

// add performs an ADD, pushing the inverse of every step onto undo.
func add(ctx context.Context, c *netconf.Bridge, args *skel.CmdArgs, undo *attach.Undo) (*current.Result, error) {
	mac, err := attach.ParseMAC(c.MAC(attach.CNIArg(args.Args, "MAC"), c.Mac))
	if err != nil {
		return nil, err
	}
	if err := attach.UsableNetNS(args.Netns); err != nil {
		return nil, err
	}
	rec := &attach.Record{Network: c.Name, Plugin: netconf.TypeBridge, ContainerID: args.ContainerID,
		IfName: args.IfName, NetNS: args.Netns, Bridge: c.BrName, Config: c.Raw}
	p := port(c, args, 0)
	p.MAC = mac
	rec.HostIf = p.HostName()
	if err := store(c).Put(rec); err != nil { // before anything exists: GC can find a crash's leftovers
		return nil, err
	}
	undo.Push(func() error { return store(c).Delete(c.Name, args.ContainerID, args.IfName) })

	res, br, host, err := allocateAndCreate(ctx, c, &p, undo)
	if err != nil {
		return nil, err
	}
	gws, err := gateways(res, c.IsGateway, c.IsDefaultGW)
	if err != nil {
		return nil, err
	}
	bridgeport.Interfaces(res, br, host, args.IfName, args.Netns)
	pod, err := p.Configure(res)
	if err != nil {
		return nil, err
	}
	if err := setupGateways(br, gws, res); err != nil {
		return nil, err
	}
	if err := setupPort(c, args, &p, pod, br, res, undo); err != nil {
		return nil, err
	}
	res.DNS = c.DNS
	rec.Addressed(res)
	if err := store(c).Put(rec); err != nil { // now with the addresses DEL may need
		return nil, err
	}
	return res, nil
}

// secure guards the pod's port (portSecurity), and undoes it on failure.
func secure(ps *netconf.PortSecurity, p portguard.Port, br netlink.Link, res *current.Result, undo *attach.Undo) error {
	if ps == nil {
		return nil
	}
	undo.Push(func() error { return portguard.Remove(p.HostIf) })
	return portguard.Secure(ps, p, br, res)
}

func setupGateways(br netlink.Link, gws []gateway, res *current.Result) error {
	for _, gw := range gws {
		if err := link.EnsureAddr(br, gw.addr); err != nil {
			return err
		}
	}
	if len(gws) == 0 {
		return nil
	}
	return enableForwarding(res)
}

func setupMasq(c *netconf.Bridge, args *skel.CmdArgs, res *current.Result, undo *attach.Undo) error {
	if !c.IPMasq {
		return nil
	}
	nets := addresses(res)
	if err := masquerade(nets, c.Name, args.IfName, args.ContainerID); err != nil {
		return fmt.Errorf("set up masquerade for %s: %w", args.ContainerID, err)
	}
	undo.Push(func() error { return unmasquerade(nets, c.Name, args.IfName, args.ContainerID) })
	return nil
}

func setupQoS(c *netconf.Bridge, args *skel.CmdArgs, hostIf string, undo *attach.Undo) error {
	if c.EffectiveQoS == nil {
		return nil
	}
	a := qosport.Attachment{PodNS: args.Netns, IfName: args.IfName, HostIf: hostIf}
	if err := qosport.Apply(a, qos.Compile(c.EffectiveQoS)); err != nil {
		return err
	}
	undo.Push(func() error { return qosport.Remove(a) })
	return nil
}

func setupSpoofCheck(c *netconf.Bridge, hostIf string, mac net.HardwareAddr, undo *attach.Undo) error {
	if !c.MacSpoofChk {
		return nil
	}
	conn, err := hostNFT()
	if err != nil {
		return err
	}
	if err := nft.ApplySpoofCheck(conn, hostIf, mac); err != nil {
		return fmt.Errorf("mac spoof check on %q: %w", hostIf, err)
	}
	undo.Push(func() error { return nft.DeleteSpoofCheck(conn, hostIf) })
	return nil
}

// allocateAndCreate runs the IPAM plugin while the bridge and the veth pair
// are set up (bridgeport.Join): the two are independent, and the IPAM
// process then costs little wall time.
func allocateAndCreate(ctx context.Context, c *netconf.Bridge, p *bridgeport.Port, undo *attach.Undo) (*current.Result, netlink.Link, netlink.Link, error) {
	join := func() (netlink.Link, netlink.Link, error) {
		br, err := link.EnsureBridge(link.BridgeSpec{Name: c.BrName, MTU: c.MTU, Promisc: c.PromiscMode, Owner: c.Name})
		if err != nil {
			return nil, nil, err
		}
		p.BridgeIndex = br.Attrs().Index
		host, err := p.Create()
		return br, host, err
	}
	return bridgeport.Join(ctx, ipamOf(c), join, func() error { _, err := p.Remove(); return err }, undo)
}

// setupPort puts the host's rules on the attachment's port: masquerading,
// QoS, the MAC spoof check and the port guard.
func setupPort(c *netconf.Bridge, args *skel.CmdArgs, p *bridgeport.Port, pod, br netlink.Link, res *current.Result, undo *attach.Undo) error {
	if err := setupMasq(c, args, res, undo); err != nil {
		return err
	}
	if err := setupQoS(c, args, p.HostName(), undo); err != nil {
		return err
	}
	if err := setupSpoofCheck(c, p.HostName(), pod.Attrs().HardwareAddr, undo); err != nil {
		return err
	}
	return secure(c.PortSecurity, portguard.Port{PodNS: args.Netns, IfName: args.IfName, HostIf: p.HostName()}, br, res, undo)
}
