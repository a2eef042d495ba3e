package netconf

import "github.com/netclass-dev/netclass/conf/field"

// BandwidthShare places an attachment in its network's shared scheduler on
// the node (plugins/bwshare): one HTB tree on the network's VXLAN device
// whose root is the network's capacity, where the attachment's class is
// guaranteed its allocation under congestion and capped at its ceiling.
// netclass-dra renders it for a network that declares a bandwidth.
type BandwidthShare struct {
	// Capacity is the network's bandwidth on the node, bits/s.
	Capacity int64 `json:"capacity"`
	// Guarantee is the attachment's allocation, bits/s: what its class is
	// given under congestion (0: best effort, the network's default class).
	Guarantee int64 `json:"guarantee,omitempty"`
	// Ceiling is the most its class may take, bits/s, between Guarantee
	// and Capacity (0: Guarantee).
	Ceiling int64 `json:"ceiling,omitempty"`
}

// MaxShareRate bounds a shared scheduler's rates, bits/s (as tbf's: no
// link carries more, and HTB's rate tables are 64 bits of bytes/s).
const MaxShareRate = 400_000_000_000

func (s *BandwidthShare) validate(p field.Path) field.Errors {
	var errs field.Errors
	if s.Capacity <= 0 || s.Capacity > MaxShareRate {
		errs.Add(p.Child("capacity"), "must be between 1 and %d bits/s, got %d", int64(MaxShareRate), s.Capacity)
	}
	if s.Guarantee < 0 || s.Guarantee > s.Capacity {
		errs.Add(p.Child("guarantee"), "must be between 0 and the capacity %d, got %d", s.Capacity, s.Guarantee)
	}
	if s.Ceiling != 0 && (s.Ceiling < s.Guarantee || s.Ceiling > s.Capacity) {
		errs.Add(p.Child("ceiling"), "must be between the guarantee %d and the capacity %d, got %d", s.Guarantee, s.Capacity, s.Ceiling)
	}
	return errs
}

// CeilingOrGuarantee is the class's ceiling: Ceiling, or Guarantee when unset.
func (s *BandwidthShare) CeilingOrGuarantee() int64 {
	if s.Ceiling > 0 {
		return s.Ceiling
	}
	return s.Guarantee
}
