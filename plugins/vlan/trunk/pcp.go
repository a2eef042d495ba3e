package trunk

import (
	"errors"

	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
)

// applyPCP makes the frames leaving through the VLAN's sub-interface carry
// the PCP c's map gives their packet's DSCP (plugins/kernel/nft.PCPTable),
// replacing another map in place (a ClusterNetwork's pcpMap edited reaches
// running pods at netclass-dra's next sync). A kernel without the nftables
// netdev egress hook (before 5.16) leaves every frame with PCP 0: a warning
// says so, and the VLAN works otherwise.
func applyPCP(c *netconf.VLAN) error {
	conn, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	err = nft.ApplyPCP(conn, c.DeviceName(), c.PCP)
	var fe *nft.FeatureError
	if errors.As(err, &fe) {
		attach.Warn("frames of VLAN %d leave %q with 802.1p priority 0 whatever their DSCP: %v", c.VLANID, c.Master, err)
		return nil
	}
	return err
}

// checkPCP verifies the sub-interface's priority table holds c's map.
func checkPCP(c *netconf.VLAN) error {
	conn, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return nft.CheckPCP(conn, c.DeviceName(), c.PCP)
}
