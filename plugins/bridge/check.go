package bridge

import (
	"context"
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

// cmdCheck verifies the attachment against prevResult: links, addresses,
// routes, bridge membership, every qdisc and rule of its QoS, the spoof
// check, and IPAM's own CHECK.
func cmdCheck(args *skel.CmdArgs) error {
	c, err := netconf.ParseBridge(args.StdinData)
	if err != nil {
		return err
	}
	prev, err := attach.BeginCheck(context.Background(), c.CNIVersion, c.RawPrevResult, args.Netns, ipamOf(c))
	if err != nil {
		return err
	}
	br, err := link.ByName(c.BrName)
	if err == nil {
		err = link.CheckOwner(br, c.Name)
	}
	if err != nil {
		return attach.Internal(err, nil)
	}
	p := port(c, args, br.Attrs().Index)
	if err := p.Check(prev); err != nil {
		return attach.Internal(err, nil)
	}
	if c.EffectiveQoS != nil {
		a := qosport.Attachment{PodNS: args.Netns, IfName: args.IfName, HostIf: p.HostName()}
		if err := qosport.Check(a, qos.Compile(c.EffectiveQoS)); err != nil {
			return attach.Internal(fmt.Errorf("qos of %q: %w", args.IfName, err), nil)
		}
	}
	if err := portguard.Check(c.PortSecurity, portguard.Port{PodNS: args.Netns, IfName: args.IfName, HostIf: p.HostName()}, prev); err != nil {
		return attach.Internal(fmt.Errorf("port security of %q: %w", args.IfName, err), nil)
	}
	if c.MacSpoofChk {
		if err := checkSpoof(p.HostName(), prev.Interfaces); err != nil {
			return attach.Internal(err, nil)
		}
	}
	return nil
}

func checkSpoof(hostIf string, ifs []*current.Interface) error {
	var mac net.HardwareAddr
	for _, i := range ifs {
		if i.Sandbox != "" {
			mac, _ = net.ParseMAC(i.Mac)
		}
	}
	conn, err := hostNFT()
	if err != nil {
		return err
	}
	return nft.CheckSpoofCheck(conn, hostIf, mac)
}

func hostNFT() (*nftables.Conn, error) { return nft.OpenCurrent() }
