package nft

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/netclass-dev/netclass/conf/qos"
)

// renderPlan adds the rules of one attachment's plan to rs: into main, the
// chain every packet the attachment sends traverses, and one chain per rule
// named prefix+"r<N>" (with its address sets prefix+"r<N>_v4|_v6"):
//
//	main:
//	  meta protocol F <dscp> A-B <dscp set R>     (per family and range the admin's policy
//	                                              leaves out: re-marked first, NDP included)
//	  meta protocol ip6 meta l4proto ipv6-icmp icmpv6 type 133-137 accept  (NDP neither marked nor metered)
//	  meta protocol F [F daddr @<prefix>rN_F] [meta l4proto P [th dport D]] goto <prefix>rN
//	                                              (per rule and family, in precedence order)
//	  meta protocol F <dscp set>                   (the attachment's DSCP, per family)
//	<prefix>rN: meta protocol F <dscp set> (per family); [limit rate over R burst B drop]; accept
//
// One chain per rule gives every rule one meter, shared by all its matches.
// The family is the frame's ethertype (`meta protocol`), which the netdev
// and bridge families see alike; ARP and every other non-IP frame match
// nothing and pass untouched.
func renderPlan(rs *ruleset, main *nftables.Chain, prefix string, plan *qos.Plan) {
	// The re-marking comes before the NDP accept: anything can be sent as
	// an ICMPv6 type 133-137 packet, to any address.
	if rm := plan.Remark; rm != nil {
		for _, v6 := range []bool{false, true} {
			for _, span := range rm.Ranges {
				rs.rules[main.Name] = append(rs.rules[main.Name],
					concat(matchProtocol(v6), matchDSCPRange(v6, span.From, span.To), setDSCP(v6, rm.To)))
			}
		}
	}
	rs.rules[main.Name] = append(rs.rules[main.Name], acceptNDP())
	for _, r := range plan.Rules {
		addRule(rs, main, prefix, r)
	}
	if plan.DSCP != nil {
		for _, v6 := range []bool{false, true} {
			rs.rules[main.Name] = append(rs.rules[main.Name], concat(matchProtocol(v6), setDSCP(v6, *plan.DSCP)))
		}
	}
}

func policyAccept() *nftables.ChainPolicy {
	p := nftables.ChainPolicyAccept
	return &p
}

func addRule(rs *ruleset, main *nftables.Chain, prefix string, r qos.CompiledRule) {
	name := fmt.Sprintf("%sr%d", prefix, r.Index)
	rs.chains = append(rs.chains, &nftables.Chain{Name: name, Table: rs.table})
	var action [][]expr.Any
	if r.DSCP != nil {
		for _, v6 := range []bool{false, true} {
			action = append(action, concat(matchProtocol(v6), setDSCP(v6, *r.DSCP)))
		}
	}
	if r.Meter != nil {
		action = append(action, dropOver(r.Meter.RateBytes, r.Meter.BurstBytes))
	}
	rs.rules[name] = append(action, []expr.Any{verdict(expr.VerdictAccept)})

	v4ok, v6ok := r.Families()
	for _, fam := range []struct {
		v6     bool
		ok     bool
		ranges []qos.Range
	}{{false, v4ok, r.V4}, {true, v6ok, r.V6}} {
		if !fam.ok {
			continue
		}
		head := matchProtocol(fam.v6)
		if fam.ranges != nil {
			s := addrSet(rs, name, fam.v6, fam.ranges)
			head = concat(head, matchDaddrInSet(fam.v6, s.Name, s.ID))
		}
		for _, ports := range portMatches(r.Ports) {
			rs.rules[main.Name] = append(rs.rules[main.Name], concat(head, ports, []expr.Any{gotoChain(name)}))
		}
	}
}

// portMatches returns one match list per port entry (one empty list when the
// rule matches every port).
func portMatches(ports []qos.PortMatch) [][]expr.Any {
	if len(ports) == 0 {
		return [][]expr.Any{nil}
	}
	out := make([][]expr.Any, 0, len(ports))
	for _, p := range ports {
		m := matchL4proto(p.Proto)
		if p.Port != 0 {
			m = concat(m, matchDport(p.Port))
		}
		out = append(out, m)
	}
	return out
}

// addrSet adds a named interval set of destination ranges for one rule.
func addrSet(rs *ruleset, rule string, v6 bool, ranges []qos.Range) *nftables.Set {
	s := newAddrSet(rs, rule, v6)
	rs.sets = append(rs.sets, setWithElements{set: s, elements: rs.cache.intervals(ranges)})
	return s
}

// newAddrSet is a named interval set of addresses for one rule, not yet
// in the ruleset.
func newAddrSet(rs *ruleset, rule string, v6 bool) *nftables.Set {
	s := &nftables.Set{
		Table: rs.table, Name: rule + "_v4", KeyType: nftables.TypeIPAddr, Interval: true,
		ID: rs.setID(),
	}
	if v6 {
		s.Name, s.KeyType = rule+"_v6", nftables.TypeIP6Addr
	}
	return s
}

// intervalElements encodes inclusive ranges the way nft does for interval
// sets: a start element per range and an end element one past its end,
// omitted when the range runs to the last address.
func intervalElements(ranges []qos.Range) []nftables.SetElement {
	if len(ranges) == 0 {
		return nil
	}
	// One allocation for the elements and one for all their keys: a sync
	// renders tens of thousands of them.
	els := make([]nftables.SetElement, 0, 2*len(ranges)+1)
	keys := make([]byte, 0, (2*len(ranges)+1)*ranges[0].From.BitLen()/8)
	add := func(a netip.Addr, end bool) {
		n := len(keys)
		keys = appendAddr(keys, a) // grows only if the families mix: each key keeps its own bytes
		els = append(els, nftables.SetElement{Key: keys[n:len(keys):len(keys)], IntervalEnd: end})
	}
	if zero := zeroOf(ranges[0].From); ranges[0].From != zero {
		add(zero, true)
	}
	for _, r := range ranges {
		add(r.From, false)
		if next := r.To.Next(); next.IsValid() {
			add(next, true)
		}
	}
	return els
}

// appendAddr appends a's bytes as AsSlice returns them.
func appendAddr(b []byte, a netip.Addr) []byte {
	if a.Is4() {
		v := a.As4()
		return append(b, v[:]...)
	}
	v := a.As16()
	return append(b, v[:]...)
}

func zeroOf(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}
