package vlan

import (
	"context"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

func cmdAdd(args *skel.CmdArgs) error {
	c, err := netconf.ParseVLAN(args.StdinData)
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

func add(ctx context.Context, c *netconf.VLAN, args *skel.CmdArgs, undo *attach.Undo) (*current.Result, error) {
	if err := attach.UsableNetNS(args.Netns); err != nil {
		return nil, err
	}
	var (
		res *current.Result
		err error
	)
	if c.LinkInContainer {
		res, err = addInPod(ctx, c, args, undo)
	} else {
		res, err = addBridged(ctx, c, args, undo)
	}
	if err != nil {
		return nil, err
	}
	if c.EffectiveQoS != nil {
		a := qosAttachment(c, args.ContainerID, args.IfName, args.Netns)
		if err := qosport.Apply(a, qos.Compile(c.EffectiveQoS)); err != nil {
			return nil, err
		}
		undo.Push(func() error { return qosport.Remove(a) })
	}
	res.DNS = c.DNS
	return res, nil
}

// qosAttachment is where the attachment's QoS lives: on the host end of its
// veth when it is bridged, in the pod otherwise.
func qosAttachment(c *netconf.VLAN, containerID, ifname, netnsPath string) qosport.Attachment {
	a := qosport.Attachment{PodNS: netnsPath, IfName: ifname}
	if !c.LinkInContainer {
		a.HostIf = port(containerID, ifname, netnsPath).HostName()
	}
	return a
}
