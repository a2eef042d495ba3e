package vlan

import (
	"context"
	"errors"
	"fmt"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/link"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/qos"
)

// removeLink deletes the pod's VLAN link; a link or namespace already gone
// is success.
func removeLink(netnsPath, ifname string) error {
	err := netns.Do(netnsPath, func() error { return link.Delete(ifname) })
	if err != nil && !errors.Is(err, netns.ErrNotFound) {
		return fmt.Errorf("delete %q in %s: %w", ifname, netnsPath, err)
	}
	return nil
}

func cmdDel(args *skel.CmdArgs) error {
	c, err := netconf.ParseVLAN(args.StdinData)
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

// teardown removes the link and the state that outlives it, then the record.
func teardown(c *netconf.VLAN, containerID, ifname, netnsPath string) error {
	err := attach.Parallel(
		func() error { return qos.RemoveRules(qos.Attachment{PodNS: netnsPath, IfName: ifname}) },
		func() error { return removeLink(netnsPath, ifname) },
	)
	if err != nil {
		return err
	}
	return store(c).Delete(c.Name, containerID, ifname)
}

func cmdGC(args *skel.CmdArgs) error {
	c, err := netconf.ParseVLAN(args.StdinData)
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
