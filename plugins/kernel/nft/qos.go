package nft

import (
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/netclass-dev/netclass/conf/qos"
)

// QoSTable names the table holding an attachment's QoS rules in the pod's
// namespace: one table per interface, so DEL and CHECK touch nothing else.
func QoSTable(ifname string) string { return "netclass_" + ifname }

const egressChain = "egress"

// ApplyQoS installs (or replaces) the attachment's DSCP and meter rules.
func ApplyQoS(c *nftables.Conn, ifname string, plan *qos.Plan) error {
	return install(c, qosRuleset(ifname, plan))
}

// DeleteQoS removes the attachment's table; none is success.
func DeleteQoS(c *nftables.Conn, ifname string) error {
	return deleteTable(c, qosTable(ifname))
}

// HasQoS reports whether the attachment's table exists.
func HasQoS(c *nftables.Conn, ifname string) (bool, error) {
	return tableExists(c, qosTable(ifname))
}

func qosTable(ifname string) *nftables.Table {
	return &nftables.Table{Name: QoSTable(ifname), Family: nftables.TableFamilyINet}
}

// qosRuleset renders the table:
//
//	chain egress { type filter hook postrouting priority mangle
//	  oifname IF meta nfproto F [daddr @rN_F] [l4proto P [th dport D]] goto rN   (per rule, in precedence order)
//	  oifname IF meta nfproto F <dscp set>                                        (attachment DSCP)
//	}
//	chain rN { <dscp set per family>; [limit rate over R burst B drop]; accept }
//
// One chain per rule gives every rule one meter, shared by all its matches.
func qosRuleset(ifname string, plan *qos.Plan) *ruleset {
	t := qosTable(ifname)
	base := &nftables.Chain{
		Name: egressChain, Table: t, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityMangle,
		Policy: policyAccept(),
	}
	rs := &ruleset{table: t, chains: []*nftables.Chain{base}, rules: map[string][][]expr.Any{}}
	for _, r := range plan.Rules {
		addRule(rs, base, ifname, r)
	}
	if plan.DSCP != nil {
		for _, v6 := range []bool{false, true} {
			rs.rules[egressChain] = append(rs.rules[egressChain],
				concat(matchOifname(ifname), matchNfproto(v6), setDSCP(v6, *plan.DSCP)))
		}
	}
	return rs
}

func policyAccept() *nftables.ChainPolicy {
	p := nftables.ChainPolicyAccept
	return &p
}

func addRule(rs *ruleset, base *nftables.Chain, ifname string, r qos.CompiledRule) {
	name := fmt.Sprintf("r%d", r.Index)
	rs.chains = append(rs.chains, &nftables.Chain{Name: name, Table: rs.table})
	var action [][]expr.Any
	if r.DSCP != nil {
		for _, v6 := range []bool{false, true} {
			action = append(action, concat(matchNfproto(v6), setDSCP(v6, *r.DSCP)))
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
		head := concat(matchOifname(ifname), matchNfproto(fam.v6))
		if fam.ranges != nil {
			s := addrSet(rs, name, fam.v6, fam.ranges)
			head = concat(head, matchDaddrInSet(fam.v6, s.Name, s.ID))
		}
		for _, ports := range portMatches(r.Ports) {
			rs.rules[base.Name] = append(rs.rules[base.Name], concat(head, ports, []expr.Any{gotoChain(name)}))
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
	s := &nftables.Set{
		Table: rs.table, Name: rule + "_v4", KeyType: nftables.TypeIPAddr, Interval: true,
		ID: uint32(len(rs.sets) + 1),
	}
	if v6 {
		s.Name, s.KeyType = rule+"_v6", nftables.TypeIP6Addr
	}
	rs.sets = append(rs.sets, setWithElements{set: s, elements: intervalElements(ranges)})
	return s
}

// intervalElements encodes inclusive ranges the way nft does for interval
// sets: a start element per range and an end element one past its end,
// omitted when the range runs to the last address.
func intervalElements(ranges []qos.Range) []nftables.SetElement {
	var els []nftables.SetElement
	if len(ranges) > 0 && ranges[0].From != zeroOf(ranges[0].From) {
		els = append(els, nftables.SetElement{Key: zeroOf(ranges[0].From).AsSlice(), IntervalEnd: true})
	}
	for _, r := range ranges {
		els = append(els, nftables.SetElement{Key: r.From.AsSlice()})
		if next := r.To.Next(); next.IsValid() {
			els = append(els, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
		}
	}
	return els
}

func zeroOf(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}
