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
	"github.com/netclass-dev/netclass/plugins/qosport"
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
	rec, err := store(c).ForDel(c.Name, args)
	if err != nil {
		return attach.Internal(err, nil)
	}
	return attach.Del(context.Background(), ipamOf(c), rec, func(r *attach.Record) error { return teardown(c, r) })
}

// teardown removes the link and the state that outlives it, then the record.
func teardown(c *netconf.VLAN, r *attach.Record) error {
	containerID, ifname, netnsPath := r.ContainerID, r.IfName, r.NetNS
	err := attach.Parallel(
		func() error { return qosport.RemoveRules(qosport.Attachment{PodNS: netnsPath, IfName: ifname}) },
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
	return attach.GC(context.Background(), store(c), c.Name, c.ValidAttachments, ipamOf(c), func(r *attach.Record) error { return teardown(c, r) })
}
