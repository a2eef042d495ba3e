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
//	  chain closed_out { type filter hook egress device IF priority -301; drop }    (until opened:
//	  chain closed_in  { type filter hook ingress device IF priority -301; drop }    accept first, then gone)
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
// Opening puts an accept before each closed chain's drop (an accepting
// base chain hands the frame on to the next one): an adding transaction,
// where deleting the chains would wait for the kernel (~15 ms on a 2-core
// VM) on the pod's start. A later call, on an interface so opened, deletes
// the closed chains.
func OpenPodGuard(c *nftables.Conn, ifname string) (bool, error) {
	st, err := podGuardState(c, ifname)
	if err != nil || st == podOpen {
		return false, err
	}
	t := podGuardTable(ifname)
	for _, name := range []string{podClosedOut, podClosedIn} {
		ch := &nftables.Chain{Name: name, Table: t}
		if st == podClosed {
			c.InsertRule(&nftables.Rule{Table: t, Chain: ch, Exprs: []expr.Any{verdict(expr.VerdictAccept)}})
			continue
		}
		c.FlushChain(ch)
		c.DelChain(ch)
	}
	if err := c.Flush(); err != nil {
		return false, fmt.Errorf("open %q in nftables table netdev %s: %w", ifname, PodGuardTable(ifname), err)
	}
	return st == podClosed, nil
}

// podGuard is an interface's guard's state.
type podGuard int

const (
	podOpen          podGuard = iota // no closed chains (or no guard)
	podClosed                        // closed chains that drop
	podOpenedByRules                 // closed chains that accept first
)

// podGuardState reads whether the interface's guard still closes it.
func podGuardState(c *nftables.Conn, ifname string) (podGuard, error) {
	t := podGuardTable(ifname)
	chains, _, present, err := readTableObjects(c, t)
	if err != nil || !present {
		return podOpen, err
	}
	st := podOpen
	for _, ch := range chains {
		if ch.Name != podClosedOut && ch.Name != podClosedIn {
			continue
		}
		rules, err := c.GetRules(t, ch)
		if err != nil {
			return podOpen, fmt.Errorf("list rules of chain netdev %s %s: %w", t.Name, ch.Name, err)
		}
		if len(rules) == 0 || !sameRule(rules[0].Exprs, []expr.Any{verdict(expr.VerdictAccept)}) {
			return podClosed, nil
		}
		st = podOpenedByRules
	}
	return st, nil
}

// PodGuardClosed reports whether the interface's guard still closes it.
func PodGuardClosed(c *nftables.Conn, ifname string) (bool, error) {
	st, err := podGuardState(c, ifname)
	return st == podClosed, err
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
