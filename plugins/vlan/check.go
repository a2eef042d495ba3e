package vlan

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

// cmdCheck verifies the attachment against prevResult: the shared devices
// and the pod's veth (or, with linkInContainer, the pod's VLAN link), its
// addresses and routes, its QoS and IPAM's allocation.
func cmdCheck(args *skel.CmdArgs) error {
	c, err := netconf.ParseVLAN(args.StdinData)
	if err != nil {
		return err
	}
	prev, err := attach.BeginCheck(context.Background(), c.CNIVersion, c.RawPrevResult, args.Netns, ipamOf(c))
	if err != nil {
		return err
	}
	check := checkBridged
	if c.LinkInContainer {
		check = checkInPod
	}
	if err := check(c, args, prev); err != nil {
		return attach.Internal(fmt.Errorf("check %q in %s: %w", args.IfName, args.Netns, err), nil)
	}
	if c.EffectiveQoS != nil {
		a := qosAttachment(c, args.ContainerID, args.IfName, args.Netns)
		if err := qosport.Check(a, qos.Compile(c.EffectiveQoS)); err != nil {
			return attach.Internal(fmt.Errorf("qos of %q: %w", args.IfName, err), nil)
		}
	}
	return nil
}
