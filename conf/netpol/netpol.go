// Package netpol holds what one attachment enforces of the NetworkPolicies
// (and MultiNetworkPolicies, ClusterNetworkPolicies) that select its pod,
// compiled (shim/netpolicy) into kernel terms: per direction, the ordered
// verdicts of the Admin tier, whether the attachment is isolated and which
// peers and ports are allowed, then the ordered verdicts of the Baseline
// tier. It is pure; plugins/kernel/nft renders it.
package netpol

import (
	"slices"

	"github.com/netclass-dev/netclass/conf/qos"
)

// Plan is an attachment's policy. The zero Plan isolates nothing: the
// attachment is open both ways, as a pod no policy selects.
type Plan struct {
	Ingress Direction
	Egress  Direction
}

// Direction is one direction of traffic of the attachment. A packet (not
// a reply of what passed the other way, nor neighbour discovery) meets
// Admin first: the first verdict that matches decides (Pass: on to the
// namespaced policies); then, when Isolated, it passes only if Allow lists
// it; otherwise Baseline's first matching verdict decides, and a packet
// none matches passes.
type Direction struct {
	// Isolated: a namespaced policy selects the pod in this direction: only
	// what Allow lists passes (after Admin).
	Isolated bool
	// Allow is the union of the rules of every policy that selects the pod
	// in this direction.
	Allow []Allow
	// Admin and Baseline are the rules of the ClusterNetworkPolicies of
	// each tier that select the pod, in precedence order.
	Admin, Baseline []Verdict
}

// Action is what a Verdict does to the packets it matches.
type Action uint8

const (
	// Accept lets the packet through: no later verdict or policy applies.
	Accept Action = iota
	// Deny drops the packet.
	Deny
	// Pass skips the tier's later verdicts: an Admin Pass hands the packet
	// to the namespaced policies (and Baseline); a Baseline Pass lets it
	// through (nothing is after Baseline).
	Pass
)

func (a Action) String() string {
	switch a {
	case Accept:
		return "Accept"
	case Deny:
		return "Deny"
	case Pass:
		return "Pass"
	}
	return "Action(?)"
}

// Verdict is one ordered rule: packets Match matches get Action.
type Verdict struct {
	Action Action
	Match  Allow
}

// Active reports whether anything in the direction filters packets.
func (d *Direction) Active() bool {
	return d.Isolated || len(d.Admin) > 0 || len(d.Baseline) > 0
}

// Allow lets traffic with a peer (the source of ingress, the destination
// of egress) through.
type Allow struct {
	// V4 and V6 are the peers' addresses per family: nil matches every
	// address of the family, an empty non-nil slice none (as qos.CompiledRule).
	V4, V6 []qos.Range
	// Ports are the transport ports allowed; empty allows every port of
	// every protocol.
	Ports []PortRange
}

// PortRange is a protocol and an inclusive range of destination ports
// (From 0: every port of the protocol).
type PortRange struct {
	Proto    uint8
	From, To uint16
}

// Families reports whether the allow can match IPv4 and IPv6 packets.
func (a *Allow) Families() (v4, v6 bool) {
	return a.V4 == nil || len(a.V4) > 0, a.V6 == nil || len(a.V6) > 0
}

// IsZero reports whether the plan filters nothing: neither direction is
// isolated nor has a verdict.
func (p *Plan) IsZero() bool { return p == nil || (!p.Ingress.Active() && !p.Egress.Active()) }

// Equal reports whether p and q are the same plan (nil is the zero plan).
// It is reflect.DeepEqual's verdict but for Allow and Ports lists, where
// empty and nil are alike (they render alike), at a fraction of its cost:
// the node's agent compares every attachment's plan at every sync.
func (p *Plan) Equal(q *Plan) bool {
	var zero Plan
	if p == nil {
		p = &zero
	}
	if q == nil {
		q = &zero
	}
	return p.Ingress.equal(&q.Ingress) && p.Egress.equal(&q.Egress)
}

func (d *Direction) equal(e *Direction) bool {
	if d.Isolated != e.Isolated || len(d.Allow) != len(e.Allow) || len(d.Admin) != len(e.Admin) || len(d.Baseline) != len(e.Baseline) {
		return false
	}
	for i := range d.Allow {
		if !d.Allow[i].equal(&e.Allow[i]) {
			return false
		}
	}
	return sameVerdicts(d.Admin, e.Admin) && sameVerdicts(d.Baseline, e.Baseline)
}

// sameVerdicts compares verdicts of equal counts.
func sameVerdicts(a, b []Verdict) bool {
	for i := range a {
		if a[i].Action != b[i].Action || !a[i].Match.equal(&b[i].Match) {
			return false
		}
	}
	return true
}

func (a *Allow) equal(b *Allow) bool {
	return sameRanges(a.V4, b.V4) && sameRanges(a.V6, b.V6) && slices.Equal(a.Ports, b.Ports)
}

// sameRanges is slices.Equal minding nil (every address) against empty (none).
func sameRanges(a, b []qos.Range) bool {
	return (a == nil) == (b == nil) && slices.Equal(a, b)
}
