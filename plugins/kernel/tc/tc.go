// Package tc owns traffic control: token-bucket shaping on a link's egress
// and the redirection of a link's ingress to an IFB, where it is shaped in
// turn. Only qdiscs and filters this kernel has everywhere are used (tbf,
// ingress, u32, mirred), so shaping works on any interface type.
package tc

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/netclass-dev/netclass/plugins/kernel/nldump"
)

// latencyMillis bounds how long a packet may wait in a tbf queue; it sizes
// the queue limit (the upstream bandwidth plugin uses the same value).
// conf/qos validates rates and bursts against the same arithmetic
// (TBFLatencySeconds, TBFBufferTicks, TBFLimitBytes), so what validates fits.
const latencyMillis = 25

// TBF is a token bucket in bytes.
type TBF struct {
	RateBytes  uint64
	BurstBytes uint64
}

// Qdisc renders the root tbf qdisc of the link.
func (s TBF) Qdisc(linkIndex int) *netlink.Tbf {
	return &netlink.Tbf{
		QdiscAttrs: netlink.QdiscAttrs{LinkIndex: linkIndex, Handle: netlink.MakeHandle(1, 0), Parent: netlink.HANDLE_ROOT},
		Rate:       s.RateBytes,
		Buffer:     bufferTicks(s.RateBytes, s.BurstBytes, netlink.TickInUsec()),
		Limit:      limitBytes(s.RateBytes, s.BurstBytes),
	}
}

// bufferTicks is the time, in scheduler ticks, the bucket takes to fill.
func bufferTicks(rateBytes, burstBytes uint64, ticksPerUsec float64) uint32 {
	if rateBytes == 0 {
		return 0
	}
	usec := float64(burstBytes) * float64(netlink.TIME_UNITS_PER_SEC) / float64(rateBytes)
	return uint32(usec * ticksPerUsec)
}

// limitBytes is the queue length: what arrives at the rate during the
// latency budget, plus the burst.
func limitBytes(rateBytes, burstBytes uint64) uint32 {
	return uint32(float64(rateBytes)*latencyMillis/1000) + uint32(burstBytes)
}

// SetRootTBF shapes the egress of the link, replacing its root qdisc.
func SetRootTBF(linkIndex int, s TBF) error {
	if err := netlink.QdiscReplace(s.Qdisc(linkIndex)); err != nil {
		return fmt.Errorf("set tbf on link %d: %w", linkIndex, err)
	}
	return nil
}

// RedirectIngress sends everything the link receives to the IFB with the
// given index (`tc filter add dev X parent ffff: protocol all u32 match u32
// 0 0 action mirred egress redirect dev ifb`).
// Any previous ingress qdisc of the link, with its filters, is replaced.
func RedirectIngress(linkIndex, ifbIndex int) error {
	if err := DeleteIngress(linkIndex); err != nil {
		return err
	}
	if err := netlink.QdiscAdd(ingressQdisc(linkIndex)); err != nil {
		return fmt.Errorf("add ingress qdisc to link %d: %w", linkIndex, err)
	}
	if err := netlink.FilterAdd(redirectFilter(linkIndex, ifbIndex)); err != nil {
		return fmt.Errorf("redirect ingress of link %d to ifb %d: %w", linkIndex, ifbIndex, err)
	}
	return nil
}

func ingressQdisc(linkIndex int) *netlink.Ingress {
	return &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{
		LinkIndex: linkIndex, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS,
	}}
}

func redirectFilter(linkIndex, ifbIndex int) *netlink.U32 {
	return &netlink.U32{
		FilterAttrs: netlink.FilterAttrs{
			LinkIndex: linkIndex, Parent: netlink.MakeHandle(0xffff, 0),
			Priority: 1, Protocol: syscall.ETH_P_ALL,
		},
		ClassId:    netlink.MakeHandle(1, 1),
		RedirIndex: ifbIndex,
		Actions:    []netlink.Action{netlink.NewMirredAction(ifbIndex)},
	}
}

// DeleteRoot removes the link's root qdisc; none is success.
func DeleteRoot(linkIndex int) error {
	q := &netlink.GenericQdisc{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: linkIndex, Parent: netlink.HANDLE_ROOT}, QdiscType: "tbf"}
	return ignoreMissing(netlink.QdiscDel(q), "delete root qdisc of link %d", linkIndex)
}

// DeleteIngress removes the link's ingress qdisc and its filters; none is success.
func DeleteIngress(linkIndex int) error {
	return ignoreMissing(netlink.QdiscDel(ingressQdisc(linkIndex)), "delete ingress qdisc of link %d", linkIndex)
}

func ignoreMissing(err error, format string, args ...any) error {
	if err == nil || errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENODEV) {
		return nil
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// qdiscs lists the link's qdiscs.
func qdiscs(l netlink.Link) ([]netlink.Qdisc, error) {
	qs, err := nldump.Retry(func() ([]netlink.Qdisc, error) { return netlink.QdiscList(l) })
	if err != nil {
		return nil, fmt.Errorf("list qdiscs of %q: %w", l.Attrs().Name, err)
	}
	return qs, nil
}
