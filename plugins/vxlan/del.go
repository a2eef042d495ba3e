package vxlan

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/bwshare"
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/plugins/vxlan/vni"
)

// leave removes the pod's veth and, if it was the VNI's last pod on this
// host, the VXLAN device and bridge.
func leave(c *netconf.VXLAN, p bridgeport.Port) error {
	_, err := p.Remove()
	unlock, lerr := vni.Lock(c)
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	defer unlock()
	serr := bwshare.Leave(c.DataDir, c.DeviceName(), p.HostName())
	return errors.Join(err, serr, vni.RemoveIfUnused(c))
}

func cmdDel(args *skel.CmdArgs) error {
	c, err := netconf.ParseVXLAN(args.StdinData)
	if err != nil {
		return err
	}
	rec, err := store(c).ForDel(c.Name, args)
	if err != nil {
		return attach.Internal(err, nil)
	}
	return attach.Del(context.Background(), ipamOf(c), rec, func(r *attach.Record) error { return teardown(c, r) })
}

func teardown(c *netconf.VXLAN, r *attach.Record) error {
	containerID, ifname, netnsPath := r.ContainerID, r.IfName, r.NetNS
	p := bridgeport.Port{ContainerID: containerID, NetNS: netnsPath, IfName: ifname}
	a := qosport.Attachment{PodNS: netnsPath, IfName: ifname, HostIf: p.HostName()}
	err := p.Teardown(
		func() error { return qosport.RemoveRules(a) },
		func() error { return leave(c, p) },
		func() error { return portguard.Remove(p.HostName()) },
	)
	if err != nil {
		return err
	}
	return store(c).Delete(c.Name, containerID, ifname)
}

func cmdGC(args *skel.CmdArgs) error {
	c, err := netconf.ParseVXLAN(args.StdinData)
	if err != nil {
		return err
	}
	return attach.GC(context.Background(), store(c), c.Name, c.ValidAttachments, ipamOf(c), func(r *attach.Record) error { return teardown(c, r) })
}
