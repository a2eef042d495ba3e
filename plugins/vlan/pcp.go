package vlan

import (
	"errors"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
)

// applyPodPCP makes the frames the pod's VLAN link sends carry the PCP c's
// map gives their packet's DSCP (linkInContainer: the link is the pod's
// interface, and its table lives in the pod, after the pod's marking). A
// kernel without the nftables netdev egress hook leaves them at PCP 0, and
// a warning says so.
func applyPodPCP(c *netconf.VLAN, netnsPath, ifname string) error {
	err := nft.InNamespace(netnsPath, func(conn *nftables.Conn) error { return nft.ApplyPCP(conn, ifname, c.PCP) })
	var fe *nft.FeatureError
	if errors.As(err, &fe) {
		attach.Warn("frames of %q (VLAN %d) leave with 802.1p priority 0 whatever their DSCP: %v", ifname, c.VLANID, err)
		return nil
	}
	return err
}

// deletePodPCP removes the link's table in the pod; a namespace that is
// gone took it with it.
func deletePodPCP(netnsPath, ifname string) error {
	err := nft.InNamespace(netnsPath, func(conn *nftables.Conn) error { return nft.DeletePCP(conn, ifname) })
	if errors.Is(err, netns.ErrNotFound) {
		return nil
	}
	return err
}
