package link

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// changeLinkData changes kind-specific settings (IFLA_INFO_DATA) of a live
// link in place, sending only what fill adds: the kernel's changelink keeps
// every setting the request leaves out, and the link stays up (netlink's
// LinkModify would send every setting, some of which a kind refuses to
// change on a live device).
func changeLinkData(l netlink.Link, fill func(data *nl.RtAttr)) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(l.Attrs().Index)
	req.AddData(msg)
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated(l.Type()))
	fill(info.AddRtAttr(nl.IFLA_INFO_DATA, nil))
	req.AddData(info)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("change %s settings of link %q: %w", l.Type(), l.Attrs().Name, err)
	}
	return nil
}
