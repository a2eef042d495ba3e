package nft

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/netclass-dev/netclass/conf/netpol"
)

// PolicyTable names the table holding the NetworkPolicy rules of one pod
// interface, in the pod's namespace, apart from its QoS table. "netclass-"
// and not "netclass_": no QoS table name ("netclass_" + an interface name,
// in the inet family too before host-side QoS) can ever be a policy
// table's, whatever the interfaces are called (DEL of an interface named
// "pol_net1" must not remove net1's policy):
//
//	table inet netclass-pol_IF {
//	  chain input  { type filter hook input priority filter; iifname IF jump ingress }   (isolated or verdicts only)
//	  chain output { type filter hook output priority filter; oifname IF jump egress }   (isolated or verdicts only)
//	  chain ingress {
//	    ct state established,related accept          # replies of allowed connections
//	    meta protocol ip6 icmpv6 type 133-137 accept  # neighbour discovery (ARP is not inet: untouched)
//	    jump ingress/admin                            # ClusterNetworkPolicy Admin tier, when it has verdicts (verdict_policy.go)
//	    meta nfproto F [F saddr @ingress/aN_F] [meta l4proto P th dport @ingress/aN_pP] accept   (isolated: per allow, family, protocol)
//	    drop                                          (isolated)
//	    ... saddr @ingress/bN_F ... accept|drop; accept   (not isolated: the Baseline tier's verdicts)
//	  }
//	  chain egress { ... daddr ... }
//	}
//
// The table matches the interface only: the pod's primary interface, and
// any other, is never filtered by it. Conntrack sees the interface's
// traffic in the pod's namespace, so a reply of a connection one side
// allowed passes the other.
func PolicyTable(ifname string) string { return "netclass-pol_" + ifname }

func policyTable(ifname string) *nftables.Table {
	return &nftables.Table{Name: PolicyTable(ifname), Family: nftables.TableFamilyINet}
}

func policyRuleset(ifname string, plan *netpol.Plan) *ruleset {
	t := policyTable(ifname)
	base := func(name string, hook *nftables.ChainHook) *nftables.Chain {
		return &nftables.Chain{Name: name, Table: t, Type: nftables.ChainTypeFilter, Hooknum: hook,
			Priority: nftables.ChainPriorityFilter, Policy: policyAccept()}
	}
	in, out := base("input", nftables.ChainHookInput), base("output", nftables.ChainHookOutput)
	rs := &ruleset{table: t, chains: []*nftables.Chain{in, out}, rules: map[string][][]expr.Any{}}
	renderDirection(rs, in, "ingress", ifname, true, plan.Ingress)
	renderDirection(rs, out, "egress", ifname, false, plan.Egress)
	return rs
}

func renderDirection(rs *ruleset, base *nftables.Chain, name, ifname string, input bool, d netpol.Direction) {
	if !d.Active() {
		return
	}
	rs.chains = append(rs.chains, &nftables.Chain{Name: name, Table: rs.table})
	rs.rules[base.Name] = [][]expr.Any{concat(matchIfname(ifname, input), []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: name}})}
	rs.rules[name] = append([][]expr.Any{acceptEstablished(), acceptNDP()}, directionRules(rs, name, input, d)...)
}

// SyncPolicy brings the interface's policy table in the pod's namespace (c)
// to the plan in place, as SyncPodQoS does for QoS; a plan that isolates
// nothing removes the table. It reports whether anything was sent.
func SyncPolicy(c *nftables.Conn, ifname string, plan *netpol.Plan) (bool, error) {
	if plan.IsZero() {
		return DeletePolicy(c, ifname)
	}
	return syncTable(c, policyRuleset(ifname, plan), "")
}

// CheckPolicy verifies the table holds exactly what the plan renders.
func CheckPolicy(c *nftables.Conn, ifname string, plan *netpol.Plan) error {
	if plan.IsZero() {
		if ok, err := tableExists(c, policyTable(ifname)); err != nil || ok {
			return errors.Join(err, fmt.Errorf("nftables table %q exists, the plan isolates nothing", PolicyTable(ifname)))
		}
		return nil
	}
	return verify(c, policyRuleset(ifname, plan))
}

// HasPolicy reports whether the interface has a policy table (in the
// namespace c is connected to).
func HasPolicy(c *nftables.Conn, ifname string) (bool, error) {
	return tableExists(c, policyTable(ifname))
}

// DeletePolicy removes the interface's policy table; none is success. It
// reports whether there was one.
func DeletePolicy(c *nftables.Conn, ifname string) (bool, error) {
	t := policyTable(ifname)
	ok, err := tableExists(c, t)
	if err != nil || !ok {
		return false, err
	}
	c.DelTable(t)
	if err := c.Flush(); err != nil && !errors.Is(err, syscall.ENOENT) {
		return false, fmt.Errorf("delete nftables table %q: %w", t.Name, err)
	}
	return true, nil
}
