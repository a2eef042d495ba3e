package vlan

import (
	"context"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

func cmdDel(args *skel.CmdArgs) error {
	c, err := netconf.ParseVLAN(args.StdinData)
	if err != nil {
		return err
	}
	rec, err := store(c).ForDel(c.Name, args)
	if err != nil {
		return attach.Internal(err, nil)
	}
	return attach.Del(context.Background(), ipamOf(c), rec, func(r *attach.Record) error { return teardown(c, r) })
}

// teardown removes the pod's link (a bridged VLAN's veth, and the shared
// devices with the last one) and the state that outlives it, then the
// record. The record says which mode made the attachment: a record without
// a bridge is a sub-interface in the pod.
func teardown(c *netconf.VLAN, r *attach.Record) error {
	containerID, ifname, netnsPath := r.ContainerID, r.IfName, r.NetNS
	a := qosport.Attachment{PodNS: netnsPath, IfName: ifname}
	rules := func() error { return qosport.RemoveRules(a) }
	remove := func() error { return attach.Parallel(rules, func() error { return removeLink(netnsPath, ifname) }) }
	if r.Bridge != "" {
		p := port(containerID, ifname, netnsPath)
		a.HostIf = p.HostName()
		remove = func() error {
			return p.Teardown(rules, func() error { return leave(c, p) }, func() error { return portguard.Remove(p.HostName()) })
		}
	}
	if err := remove(); err != nil {
		return err
	}
	return store(c).Delete(c.Name, containerID, ifname)
}

func cmdGC(args *skel.CmdArgs) error {
	c, err := netconf.ParseVLAN(args.StdinData)
	if err != nil {
		return err
	}
	return attach.GC(context.Background(), store(c), c.Name, c.ValidAttachments, ipamOf(c), func(r *attach.Record) error { return teardown(c, r) })
}
