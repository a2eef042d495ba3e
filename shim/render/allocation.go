package render

import (
	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
)

// Shaping an allocation: the burst of a ceiling the allocation sets is
// BurstTime of the rate, at least MinBurstBits (two full-size Ethernet
// frames, so a frame always fits the bucket) and at most MaxFillSeconds of
// the rate (tbf holds about 274 s). Allocations above MaxShapedRate are not
// shaped (no link carries them, and tbf's queue limit overflows there).
const (
	BurstSeconds   = 0.01
	MinBurstBits   = 2 * 1514 * 8
	MaxFillSeconds = 200
	MaxShapedRate  = 400_000_000_000
	// minRate is the smallest rate tbf shapes (it counts whole bytes).
	minRate = 8
)

// AttachmentQoS is the qos an attachment enforces before NetworkQoS rules:
// the network's qos block with the claim's merged over it (BaseQoS), under
// the ceiling of the bandwidth its claim was allocated (Ceiling).
func AttachmentQoS(in Input) (*qos.Spec, error) {
	base, err := BaseQoS(in.Network, in.Config)
	if err != nil {
		return nil, err
	}
	return Ceiling(base, in.Network.Bandwidth.CeilingOf(in.Allocated)), nil
}

// Share is the attachment's place in its network's shared scheduler on the
// node (plugins/bwshare): a netclass-vxlan attachment allocated bandwidth
// is guaranteed its allocation in the HTB tree of the VNI's device, up to
// its ceiling (nil: none — other network types, no allocation: a
// best-effort attachment is in the tree's default class whatever it is
// rendered with).
func Share(in Input) *netconf.BandwidthShare {
	pol := in.Network.Bandwidth
	if in.Network.Type != netconf.TypeVXLAN || pol == nil || in.Allocated <= 0 || pol.Capacity > netconf.MaxShareRate {
		return nil
	}
	return &netconf.BandwidthShare{Capacity: pol.Capacity, Guarantee: min(in.Allocated, pol.Capacity), Ceiling: min(pol.CeilingOf(in.Allocated), pol.Capacity)}
}

// Ceiling puts the egress of the attachment under the bandwidth its claim
// was allocated (bits/s; 0: none, s is returned unchanged). The tighter
// limit wins: an egressRate of the network or the claim at or below the
// allocation stays as it is, with its burst; above it (or without one) the
// allocation becomes the egress rate, with AllocationBurst or the spec's
// own burst, whichever is smaller. Ingress is left alone: the capacity the
// scheduler accounts is what the node sends through its uplink.
func Ceiling(s *qos.Spec, allocated int64) *qos.Spec {
	if allocated <= 0 || allocated > MaxShapedRate {
		return s
	}
	out := qos.Merge(s, nil)
	if out == nil {
		out = &qos.Spec{}
	}
	if out.EgressRate > 0 && out.EgressRate <= allocated {
		return out
	}
	rate := max(allocated, minRate)
	burst := AllocationBurst(rate)
	if out.EgressBurst > 0 {
		burst = min(burst, out.EgressBurst)
	}
	out.EgressRate, out.EgressBurst = rate, burst
	return out
}

// AllocationBurst is the burst, in bits, of a ceiling at rate bits/s.
func AllocationBurst(rate int64) int64 {
	burst := max(int64(float64(rate)*BurstSeconds), MinBurstBits)
	return min(burst, rate*MaxFillSeconds)
}
