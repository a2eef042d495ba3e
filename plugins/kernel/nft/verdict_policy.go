package nft

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
)

// directionRules renders what a direction's chain does after its fixed
// accepts (replies, neighbour discovery, DHCP):
//
//	jump CHAIN/admin              # the Admin tier's verdicts, when any:
//	                              #   match accept | match drop | match return (Pass)
//	allows...; drop               # isolated: the namespaced policies
//	baseline verdicts...; accept  # not isolated: the Baseline tier (a Pass accepts)
//
// The Admin verdicts have a chain of their own so that a Pass returns from
// it to the namespaced policies, skipping the tier's later verdicts; an
// Admin verdict's sets are CHAIN/admin/vN_*, a Baseline one's CHAIN/bN_*.
func directionRules(rs *ruleset, chain string, ingress bool, d netpol.Direction) [][]expr.Any {
	var rules [][]expr.Any
	if len(d.Admin) > 0 {
		rules = append(rules, adminJump(rs, chain, ingress, d.Admin))
	}
	if d.Isolated {
		for i, a := range d.Allow {
			rules = append(rules, matchRules(rs, fmt.Sprintf("%s/a%d", chain, i), ingress, a, expr.VerdictAccept)...)
		}
		return append(rules, []expr.Any{verdict(expr.VerdictDrop)})
	}
	rules = append(rules, verdictRules(rs, chain+"/b", ingress, d.Baseline, expr.VerdictAccept)...)
	return append(rules, []expr.Any{verdict(expr.VerdictAccept)})
}

// adminJump renders the Admin tier's chain, chain+"/admin" (a Pass
// returns from it), and returns the rule jumping to it.
func adminJump(rs *ruleset, chain string, ingress bool, admin []netpol.Verdict) []expr.Any {
	name := chain + "/admin"
	rs.chains = append(rs.chains, &nftables.Chain{Name: name, Table: rs.table})
	rs.rules[name] = verdictRules(rs, name+"/v", ingress, admin, expr.VerdictReturn)
	return []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: name}}
}

// verdictRules renders ordered verdicts, their sets named prefix<N>; pass
// is what a Pass does in their tier.
func verdictRules(rs *ruleset, prefix string, ingress bool, vs []netpol.Verdict, pass expr.VerdictKind) [][]expr.Any {
	var rules [][]expr.Any
	for i, v := range vs {
		kind := expr.VerdictAccept
		switch v.Action {
		case netpol.Deny:
			kind = expr.VerdictDrop
		case netpol.Pass:
			kind = pass
		}
		rules = append(rules, matchRules(rs, fmt.Sprintf("%s%d", prefix, i), ingress, v.Match, kind)...)
	}
	return rules
}

// matchRules renders one allow's match ending in the verdict: a rule per
// family and protocol, with the peers in a set per family (named
// <name>_v4|_v6, or an earlier allow's set of the same peers) and the
// ports in the rule or a set per protocol (<name>_p<proto>, portSets), so
// the rules do not grow with the peers or the ports a policy lists.
func matchRules(rs *ruleset, name string, ingress bool, a netpol.Allow, kind expr.VerdictKind) [][]expr.Any {
	var rules [][]expr.Any
	ports := portSets(rs, name, a.Ports)
	v4ok, v6ok := a.Families()
	for _, fam := range []struct {
		v6, ok bool
		ranges []qos.Range
	}{{false, v4ok, a.V4}, {true, v6ok, a.V6}} {
		if !fam.ok {
			continue
		}
		head := matchNFProto(fam.v6)
		if fam.ranges != nil {
			s := peerSet(rs, name, fam.v6, fam.ranges)
			head = concat(head, matchAddrInSet(fam.v6, ingress, s.Name, s.ID))
		}
		for _, p := range ports {
			rules = append(rules, concat(head, p, []expr.Any{verdict(kind)}))
		}
	}
	return rules
}

// peerSet returns the set of the port holding exactly these peers: the one
// an earlier allow of the port made (the policies selecting a pod often
// name the same peers: each set is one more object the kernel looks up by
// name in a list of the table's sets, test/bench/README.md, "Sets per
// port"), else a new one named after this allow.
func peerSet(rs *ruleset, name string, v6 bool, ranges []qos.Range) *nftables.Set {
	els := rs.cache.intervals(ranges)
	key := nftables.TypeIPAddr
	if v6 {
		key = nftables.TypeIP6Addr
	}
	s, h := rs.shared.find(rs.sets, key, els)
	if s == nil {
		s = newAddrSet(rs, name, v6)
		rs.sets = rs.shared.add(rs.sets, h, setWithElements{set: s, elements: els})
	}
	return s
}
