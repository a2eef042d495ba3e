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
	"github.com/netclass-dev/netclass/plugins/portguard"
	"github.com/netclass-dev/netclass/plugins/qosport"
)

// cmdDel is idempotent: a missing namespace, link, rule or IPAM allocation
// is success.
func cmdDel(args *skel.CmdArgs) error {
	c, err := netconf.ParseBridge(args.StdinData)
	if err != nil {
		return err
	}
	rec, err := store(c).ForDel(c.Name, args)
	if err != nil {
		return attach.Internal(err, nil)
	}
	return attach.Del(context.Background(), ipamOf(c), rec, func(r *attach.Record) error { return teardown(c, r) })
}

// teardown removes everything of one attachment but its IPAM allocation.
// The port's devices go in one request while its QoS rules on the host are
// deleted (bridgeport.Port.Teardown); then the steps that wait for the
// kernel (the veth and egress IFB device by device for a port made before
// link groups, the spoof-check table, the guard) run at once so their waits
// overlap; the host end's qdiscs go with the veth.
func teardown(c *netconf.Bridge, r *attach.Record) error {
	containerID, ifname, netnsPath := r.ContainerID, r.IfName, r.NetNS
	p := bridgeport.Port{ContainerID: containerID, NetNS: netnsPath, IfName: ifname}
	a := qosport.Attachment{PodNS: netnsPath, IfName: ifname, HostIf: p.HostName()}
	var addrs []*net.IPNet
	err := p.Teardown(
		func() error { return qosport.RemoveRules(a) },
		func() (err error) { addrs, err = p.Remove(); return err },
		func() error { return removeSpoofCheck(c, p.HostName()) },
		func() error { return portguard.Remove(p.HostName()) },
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
	err = attach.GC(context.Background(), store(c), c.Name, c.ValidAttachments, ipamOf(c), func(r *attach.Record) error { return teardown(c, r) })
	if c.IPMasq {
		if merr := ip.GCIPMasqForNetwork(c.Name, c.ValidAttachments); merr != nil {
			err = errors.Join(err, attach.Internal(merr, nil))
		}
	}
	return err
}
