package bridge

import (
	"context"
	"errors"
	"net"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/plugins/pkg/ip"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/bridgeport"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/qos"
)

// cmdDel is idempotent: a missing namespace, link, rule or IPAM allocation
// is success.
func cmdDel(args *skel.CmdArgs) error {
	c, err := netconf.ParseBridge(args.StdinData)
	if err != nil {
		return err
	}
	rec, err := store(c).Get(c.Name, args.ContainerID, args.IfName)
	if err != nil {
		return attach.Internal(err, nil)
	}
	if rec == nil {
		rec = &attach.Record{Network: c.Name, ContainerID: args.ContainerID, IfName: args.IfName}
	}
	if args.Netns != "" { // the runtime may omit a namespace that is gone
		rec.NetNS = args.Netns
	}
	err = attach.Parallel(
		func() error { return ipamOf(c).Del(context.Background()) },
		func() error { return teardown(c, rec) },
	)
	if err != nil {
		return attach.Internal(err, nil)
	}
	return nil
}

// teardown removes everything of one attachment but its IPAM allocation.
// The steps that wait for the kernel (deleting the veth, the pod's nftables
// table, the spoof-check table) run at once so their waits overlap; the
// qdiscs go with the veth.
func teardown(c *netconf.Bridge, r *attach.Record) error {
	containerID, ifname, netnsPath := r.ContainerID, r.IfName, r.NetNS
	p := bridgeport.Port{ContainerID: containerID, NetNS: netnsPath, IfName: ifname}
	var addrs []*net.IPNet
	err := attach.Parallel(
		func() error { return qos.RemoveRules(qos.Attachment{PodNS: netnsPath, IfName: ifname}) },
		func() (err error) { addrs, err = p.Remove(); return err },
		func() error { return removeSpoofCheck(c, p.HostName()) },
	)
	if c.IPMasq {
		if len(addrs) == 0 { // the pod's interface was already gone
			addrs = r.IPNets()
		}
		err = errors.Join(err, unmasquerade(addrs, c.Name, ifname, containerID))
	}
	if err != nil {
		return err
	}
	return store(c).Delete(c.Name, containerID, ifname)
}

func removeSpoofCheck(c *netconf.Bridge, hostIf string) error {
	if !c.MacSpoofChk {
		return nil
	}
	conn, err := hostNFT()
	if err != nil {
		return err
	}
	return nft.DeleteSpoofCheck(conn, hostIf)
}

// cmdGC tears down every recorded attachment of this network that is not in
// cni.dev/valid-attachments, then lets IPAM and masquerade GC do the same.
func cmdGC(args *skel.CmdArgs) error {
	c, err := netconf.ParseBridge(args.StdinData)
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
			errs = append(errs, ipamOf(c).ReleaseFor(context.Background(), r), teardown(c, r))
		}
	}
	errs = append(errs, ipamOf(c).GC(context.Background()))
	if c.IPMasq {
		errs = append(errs, ip.GCIPMasqForNetwork(c.Name, c.ValidAttachments))
	}
	if err := errors.Join(errs...); err != nil {
		return attach.Internal(err, nil)
	}
	return nil
}
