package link

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// A pod's port on the host is a veth whose host end, and the devices that
// exist only for it (its egress IFB), share a link group: the host end's
// ifindex with the high bit set. Deleting the group removes all of them, and
// the veth's pod end with them, in one request: the kernel unregisters them
// as one batch and waits for one RCU grace period instead of one per device
// (the wait that dominates a DEL: about 20 ms each on a 2-core VM).
// Ifindexes are unique in a namespace, so two live ports never share a group,
// and the high bit keeps clear of the small groups administrators name in
// /etc/iproute2/group.
const portGroupBit = 1 << 31

// PortGroup is the link group of the port whose host end has ifindex index.
func PortGroup(index int) uint32 { return portGroupBit | uint32(index) }

// DeletePort deletes the host end hostIf with its pod end and every device
// of its port's group, in one request. It reports false, deleting nothing,
// when there is no such link or it is not in its port's group (made by an
// older netclass, or not by netclass): the caller then deletes device by
// device.
func DeletePort(hostIf string) (bool, error) {
	l, err := netlink.LinkByName(hostIf)
	if IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find link %q: %w", hostIf, err)
	}
	group := PortGroup(l.Attrs().Index)
	if l.Attrs().Group != group {
		return false, nil
	}
	req := nl.NewNetlinkRequest(unix.RTM_DELLINK, unix.NLM_F_ACK)
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_GROUP, nl.Uint32Attr(group)))
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil && !errors.Is(err, unix.ENODEV) {
		return false, fmt.Errorf("delete the devices of port %q (link group %#x): %w", hostIf, group, err)
	}
	return true, nil
}
