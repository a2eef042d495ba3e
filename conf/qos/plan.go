package qos

import (
	"net/netip"
	"sort"
)

// Plan is a validated Spec compiled into what the kernel is told: byte units,
// address ranges instead of CIDR-minus-except, and rules in evaluation order.
type Plan struct {
	Ingress *Shaper // traffic towards the pod; nil: not shaped
	Egress  *Shaper // traffic from the pod; nil: not shaped
	DSCP    *uint8  // DSCP of every egress IP packet no rule marks; nil: untouched
	// Remark re-marks, before any rule, the egress IP packets whose DSCP
	// the admin's policy does not allow (nil: none).
	Remark *Remark
	Rules  []CompiledRule
	// Queue is the queue under the shapers (Queue*, never ""), and
	// ExplicitQueue whether the configuration named it: a kernel without
	// the queue is then an error, while the default falls back to tbf
	// alone with a warning.
	Queue         string
	ExplicitQueue bool
}

// Shaper is a token bucket in bytes.
type Shaper struct {
	RateBytes  uint64 // bytes per second
	BurstBytes uint64
}

// Meter drops what exceeds its rate.
type Meter struct {
	RateBytes  uint64 // bytes per second
	BurstBytes uint64
}

// CompiledRule is one egress rule in kernel terms. Rules are evaluated in the
// order of Plan.Rules and the first match wins.
type CompiledRule struct {
	// Index is the rule's position in the spec's egress list.
	Index    int
	Priority int
	DSCP     *uint8 // the rule's DSCP, or the attachment's when the rule sets none
	Meter    *Meter
	// V4 and V6 are the destination ranges per family. A nil slice matches
	// every address of the family, an empty non-nil slice none of them.
	V4, V6 []Range
	// Ports to match; empty matches every packet.
	Ports []PortMatch
}

// PortMatch is a transport protocol and destination port (0: any port).
type PortMatch struct {
	Proto uint8
	Port  uint16
}

// Range is an inclusive address range.
type Range struct {
	From, To netip.Addr
}

// Families reports whether the rule can match IPv4 and IPv6 packets.
func (r *CompiledRule) Families() (v4, v6 bool) {
	return r.V4 == nil || len(r.V4) > 0, r.V6 == nil || len(r.V6) > 0
}

// IsZero reports whether the plan changes nothing.
func (p *Plan) IsZero() bool {
	return p == nil || (p.Ingress == nil && p.Egress == nil && p.DSCP == nil && len(p.Rules) == 0 && p.Remark == nil)
}

// NeedsRules reports whether the plan needs packet rules (DSCP or meters).
func (p *Plan) NeedsRules() bool {
	return p != nil && (p.DSCP != nil || len(p.Rules) > 0 || p.Remark != nil)
}

// Compile turns a spec into a plan. The spec must have passed Validate.
func Compile(s *Spec) *Plan {
	queue, explicit := queueOf(s)
	if s.IsZero() {
		return &Plan{Queue: queue, ExplicitQueue: explicit}
	}
	p := &Plan{
		Ingress: shaper(s.IngressRate, s.IngressBurst),
		Egress:  shaper(s.EgressRate, s.EgressBurst),
		DSCP:    dscp(s.DSCP),
		Remark:  s.Policy.compile(),
		Queue:   queue, ExplicitQueue: explicit,
	}
	for i := range s.Egress {
		p.Rules = append(p.Rules, compileRule(i, &s.Egress[i], p.DSCP))
	}
	// Highest priority first; among equal priorities the later rule wins
	// (OKEP-4380: the first rule of a list has the lowest precedence).
	sort.SliceStable(p.Rules, func(a, b int) bool {
		ra, rb := p.Rules[a], p.Rules[b]
		if ra.Priority != rb.Priority {
			return ra.Priority > rb.Priority
		}
		return ra.Index > rb.Index
	})
	return p
}

func shaper(rateBits, burstBits int64) *Shaper {
	if rateBits <= 0 {
		return nil
	}
	return &Shaper{RateBytes: uint64(rateBits) / 8, BurstBytes: uint64(burstBits) / 8}
}

func dscp(v *int) *uint8 {
	if v == nil {
		return nil
	}
	d := uint8(*v)
	return &d
}

func compileRule(i int, r *Rule, attachmentDSCP *uint8) CompiledRule {
	c := CompiledRule{Index: i, Priority: r.Priority, DSCP: dscp(r.DSCP)}
	if c.DSCP == nil {
		c.DSCP = attachmentDSCP
	}
	if b := r.Bandwidth; b != nil {
		burst := b.Burst
		if burst == 0 {
			burst = b.Rate // one second's worth, in kilobits
		}
		// kbps -> bytes/s and kilobits -> bytes: x * 1000 / 8.
		c.Meter = &Meter{RateBytes: uint64(b.Rate) * 125, BurstBytes: uint64(burst) * 125}
	}
	c.V4, c.V6 = Destinations(r.Classifier.To)
	for _, port := range r.Classifier.Ports {
		proto, _ := protocolNumber(port.Protocol)
		m := PortMatch{Proto: proto}
		if port.Port != nil {
			m.Port = uint16(*port.Port)
		}
		c.Ports = append(c.Ports, m)
	}
	return c
}

// Destinations turns a peer list into ranges per family: the union over
// the blocks of (cidr minus its exceptions); a family the blocks cover
// whole is nil (every address), one they do not touch empty. The blocks
// must be valid (Validate). NetworkPolicy peers compile with it too.
func Destinations(peers []Peer) (v4, v6 []Range) {
	if len(peers) == 0 {
		return nil, nil
	}
	v4, v6 = []Range{}, []Range{}
	for _, peer := range peers {
		b := peer.IPBlock
		cidr := netip.MustParsePrefix(b.CIDR).Masked()
		cuts := make([]Range, 0, len(b.Except))
		for _, ex := range b.Except {
			cuts = append(cuts, prefixRange(netip.MustParsePrefix(ex).Masked()))
		}
		rs := without(prefixRange(cidr), cuts)
		if cidr.Addr().Is4() {
			v4 = append(v4, rs...)
		} else {
			v6 = append(v6, rs...)
		}
	}
	v4, v6 = normalize(v4), normalize(v6)
	if isWhole(v4, true) {
		v4 = nil
	}
	if isWhole(v6, false) {
		v6 = nil
	}
	return v4, v6
}
