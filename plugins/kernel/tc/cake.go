package tc

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// cake's netlink attributes (linux/pkt_sched.h): vishvananda/netlink does
// not know the qdisc, so it is spoken here.
const (
	tcaCakeBaseRate64   = 2
	tcaCakeDiffservMode = 3
	cakeBestEffort      = 3
)

// setRootCake makes cake, shaping at rateBytes per second, the link's root
// qdisc. One tin (besteffort): the attachment's queue shares its rate
// fairly among flows whatever their DSCP (which, on a host port, is set
// after the shaper, and is the fabric's to act on). Its other settings
// are cake's defaults: flows isolated per host then per flow, ECN marking,
// GSO packets split below 1 Gbit/s.
func setRootCake(linkIndex int, rateBytes uint64) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWQDISC, unix.NLM_F_CREATE|unix.NLM_F_REPLACE|unix.NLM_F_ACK)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(linkIndex), Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT})
	req.AddData(nl.NewRtAttr(unix.TCA_KIND, nl.ZeroTerminated(QueueCake)))
	opts := nl.NewRtAttr(unix.TCA_OPTIONS, nil)
	opts.AddRtAttr(tcaCakeBaseRate64, nl.Uint64Attr(rateBytes))
	opts.AddRtAttr(tcaCakeDiffservMode, nl.Uint32Attr(cakeBestEffort))
	req.AddData(opts)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("set cake on link %d: %w", linkIndex, err)
	}
	return nil
}

// cakeSettings are what CHECK reads back of a cake qdisc.
type cakeSettings struct {
	RateBytes uint64
	Diffserv  uint32
}

// rootCake reads the settings of the link's root cake; ok is false when
// its root qdisc is not cake.
func rootCake(linkIndex int) (s cakeSettings, ok bool, err error) {
	req := nl.NewNetlinkRequest(unix.RTM_GETQDISC, unix.NLM_F_DUMP)
	req.AddData(&nl.TcMsg{Family: nl.FAMILY_ALL, Ifindex: int32(linkIndex)})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWQDISC)
	if err != nil {
		return s, false, fmt.Errorf("list qdiscs of link %d: %w", linkIndex, err)
	}
	for _, m := range msgs {
		tcm := nl.DeserializeTcMsg(m)
		if tcm.Ifindex != int32(linkIndex) || tcm.Parent != netlink.HANDLE_ROOT {
			continue
		}
		attrs, err := nl.ParseRouteAttr(m[tcm.Len():])
		if err != nil {
			return s, false, err
		}
		return parseCake(attrs)
	}
	return s, false, nil
}

func parseCake(attrs []syscall.NetlinkRouteAttr) (s cakeSettings, ok bool, err error) {
	for _, a := range attrs {
		switch a.Attr.Type {
		case unix.TCA_KIND:
			ok = string(a.Value) == QueueCake+"\x00"
		case unix.TCA_OPTIONS:
			opts, err := nl.ParseRouteAttr(a.Value)
			if err != nil {
				return s, false, err
			}
			for _, o := range opts {
				switch {
				case o.Attr.Type == tcaCakeBaseRate64 && len(o.Value) == 8:
					s.RateBytes = binary.NativeEndian.Uint64(o.Value)
				case o.Attr.Type == tcaCakeDiffservMode && len(o.Value) == 4:
					s.Diffserv = binary.NativeEndian.Uint32(o.Value)
				}
			}
		}
	}
	return s, ok, nil
}
