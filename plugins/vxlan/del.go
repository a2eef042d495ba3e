package vxlan

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/qos"
)

// leave removes the pod's veth and, if it was the VNI's last pod on this
// host, the VXLAN device and bridge.
func leave(c *netconf.VXLAN, p bridgeport.Port) error {
	_, err := p.Remove()
	unlock, lerr := lock(c)
	if lerr != nil {
		return errors.Join(err, lerr)
	}
	defer unlock()
	return errors.Join(err, removeSharedIfUnused(c))
}

func cmdDel(args *skel.CmdArgs) error {
	c, err := netconf.ParseVXLAN(args.StdinData)
	if err != nil {
		return err
	}
	netnsPath := args.Netns
	if netnsPath == "" {
		if rec, _ := store(c).Get(c.Name, args.ContainerID, args.IfName); rec != nil {
			netnsPath = rec.NetNS
		}
	}
	err = attach.Parallel(
		func() error { return ipamOf(c).Del(context.Background()) },
		func() error { return teardown(c, args.ContainerID, args.IfName, netnsPath) },
	)
	if err != nil {
		return attach.Internal(err, nil)
	}
	return nil
}

func teardown(c *netconf.VXLAN, containerID, ifname, netnsPath string) error {
	p := bridgeport.Port{ContainerID: containerID, NetNS: netnsPath, IfName: ifname}
	err := attach.Parallel(
		func() error { return qos.RemoveRules(qos.Attachment{PodNS: netnsPath, IfName: ifname}) },
		func() error { return leave(c, p) },
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
	recs, err := store(c).List(c.Name)
	if err != nil {
		return attach.Internal(err, nil)
	}
	valid := attach.Valid(c.ValidAttachments)
	var errs []error
	for _, r := range recs {
		if !valid[r.Key()] {
			errs = append(errs, ipamOf(c).ReleaseFor(context.Background(), r), teardown(c, r.ContainerID, r.IfName, r.NetNS))
		}
	}
	errs = append(errs, ipamOf(c).GC(context.Background()))
	if err := errors.Join(errs...); err != nil {
		return attach.Internal(err, nil)
	}
	return nil
}
