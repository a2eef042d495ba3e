package nft

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// The guard of an interface without a host end (a VF, macvlan, a VLAN
// made in the pod), in the pod's namespace, at the netdev hooks, which see
// every frame the interface sends, packet sockets' too:
//
//	table netdev netclass-guard_IF {
//	  chain egress     { type filter hook egress device IF priority -300; <the guard's rules (guard.go)> }
//	  chain closed_out { type filter hook egress device IF priority -301; drop }    (until opened)
//	  chain closed_in  { type filter hook ingress device IF priority -301; drop }   (until opened)
//	}
//
// A pod with CAP_NET_ADMIN can remove it; one with only CAP_NET_RAW
// cannot, and its hand-built frames pass the same checks as the others.
func PodGuardTable(ifname string) string { return "netclass-guard_" + ifname }

const podClosedOut, podClosedIn = "closed_out", "closed_in"

func podGuardTable(ifname string) *nftables.Table {
	return &nftables.Table{Name: PodGuardTable(ifname), Family: nftables.TableFamilyNetdev}
}

// podGuardRuleset renders the table, with the closed chains when closed.
func podGuardRuleset(ifname string, g Guard, closed bool) *ruleset {
	t := podGuardTable(ifname)
	hooked := func(name string, hook *nftables.ChainHook, prio int32) *nftables.Chain {
		p := nftables.ChainPriority(prio)
		return &nftables.Chain{Name: name, Table: t, Type: nftables.ChainTypeFilter, Hooknum: hook, Priority: &p, Device: ifname, Policy: policyAccept()}
	}
	egress := hooked("egress", nftables.ChainHookEgress, -300)
	rs := &ruleset{table: t, chains: []*nftables.Chain{egress}, rules: map[string][][]expr.Any{}}
	rs.rules[egress.Name] = guardRules(rs, "", g)
	if closed {
		for _, ch := range []*nftables.Chain{hooked(podClosedOut, nftables.ChainHookEgress, -301), hooked(podClosedIn, nftables.ChainHookIngress, -301)} {
			rs.chains = append(rs.chains, ch)
			rs.rules[ch.Name] = [][]expr.Any{{verdict(expr.VerdictDrop)}}
		}
	}
	return rs
}

// InstallPodGuard puts the interface of the pod c is connected to under
// guard, closed (passing nothing either way until OpenPodGuard) when asked.
func InstallPodGuard(c *nftables.Conn, ifname string, g Guard, closed bool) error {
	return unsupported(install(c, podGuardRuleset(ifname, g, closed)), PodEgressHook)
}

// OpenPodGuard lets the interface pass traffic (its guard stays); an open
// or unguarded interface is left alone. It reports whether it opened it.
func OpenPodGuard(c *nftables.Conn, ifname string) (bool, error) {
	closed, err := PodGuardClosed(c, ifname)
	if err != nil || !closed {
		return false, err
	}
	for _, name := range []string{podClosedOut, podClosedIn} {
		c.DelChain(&nftables.Chain{Name: name, Table: podGuardTable(ifname)})
	}
	if err := c.Flush(); err != nil {
		return false, fmt.Errorf("open %q in nftables table netdev %s: %w", ifname, PodGuardTable(ifname), err)
	}
	return true, nil
}

// PodGuardClosed reports whether the interface's guard still closes it.
func PodGuardClosed(c *nftables.Conn, ifname string) (bool, error) {
	chains, _, present, err := readTableObjects(c, podGuardTable(ifname))
	if err != nil || !present {
		return false, err
	}
	for _, ch := range chains {
		if ch.Name == podClosedOut || ch.Name == podClosedIn {
			return true, nil
		}
	}
	return false, nil
}

// CheckPodGuard verifies the interface's guard (not whether it is open:
// netclass-dra opens it once the attachment's policy is in place).
func CheckPodGuard(c *nftables.Conn, ifname string, g Guard) error {
	rs := podGuardRuleset(ifname, g, false)
	return verify(c, rs)
}

// DeletePodGuard removes the interface's guard; none is success.
func DeletePodGuard(c *nftables.Conn, ifname string) error {
	return deleteTable(c, podGuardTable(ifname))
}
