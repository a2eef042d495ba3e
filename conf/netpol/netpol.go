// Package netpol holds what one attachment enforces of the NetworkPolicies
// that select its pod, compiled (shim/netpol) into kernel terms: per
// direction, whether the attachment is isolated and which peers and ports
// are allowed. It is pure; plugins/kernel/nft renders it.
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

// Direction is one direction of traffic of the attachment.
type Direction struct {
	// Isolated: only what Allow lists passes (and replies of what passed the
	// other way, and neighbour discovery); otherwise everything passes.
	Isolated bool
	// Allow is the union of the rules of every policy that selects the pod
	// in this direction.
	Allow []Allow
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

// IsZero reports whether the plan isolates nothing.
func (p *Plan) IsZero() bool { return p == nil || (!p.Ingress.Isolated && !p.Egress.Isolated) }

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
	if d.Isolated != e.Isolated || len(d.Allow) != len(e.Allow) {
		return false
	}
	for i := range d.Allow {
		if !d.Allow[i].equal(&e.Allow[i]) {
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
