package nft

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/netclass-dev/netclass/conf/qos"
)

// SyncPortQoS brings the host end's rules to the plan in place, in one
// transaction holding only the differences (a rule's chain rewritten when
// its rules changed, a destination set updated element by element): what
// did not change is not touched, a meter whose rule is unchanged keeps its
// state, and no packet ever meets a half-updated port. It reports whether
// anything was sent; rules already equal to the plan cost only the reads.
// A port without rules gets them as ApplyPortQoS would install them, and a
// plan without rules removes the port's.
func SyncPortQoS(c *nftables.Conn, hostIf string, plan *qos.Plan) (bool, error) {
	if !plan.NeedsRules() {
		found, err := HasPortQoS(c, hostIf)
		if err != nil || !found {
			return false, err
		}
		return true, DeletePortQoS(c, hostIf)
	}
	st, err := readPort(c, hostIf)
	if err != nil {
		return false, err
	}
	if !st.table || len(st.chains) == 0 {
		return true, ApplyPortQoS(c, hostIf, plan)
	}
	t := portTable()
	got, err := readOwned(c, t, st.chains, st.sets)
	if err != nil {
		return false, err
	}
	want := portRuleset(hostIf, plan)
	ch := diff(got, want)
	mapped := st.element != nil && st.element.Kind == expr.VerdictGoto && st.element.Chain == PortChain(hostIf)
	if ch.empty() && mapped && st.baseOK {
		return false, nil
	}
	if !st.baseOK {
		if err := queueBase(c); err != nil {
			return false, err
		}
	}
	if err := queueChanges(c, t, want, ch); err != nil {
		return false, err
	}
	if !mapped {
		if err := remap(c, st, hostIf); err != nil {
			return false, err
		}
	}
	if err := c.Flush(); err != nil {
		return false, unsupported(fmt.Errorf("update the rules of port %q in nftables table bridge %s (%s): %w", hostIf, PortQoSTable, ch, err), PortFeature)
	}
	return true, nil
}

// remap points the host end's map entry at its chain.
func remap(c *nftables.Conn, st *portState, hostIf string) error {
	if st.element != nil && st.mapSet != nil {
		if err := c.SetDeleteElements(portMapSet(), []nftables.SetElement{{Key: ifname(hostIf)}}); err != nil {
			return fmt.Errorf("unmap port %q: %w", hostIf, err)
		}
	}
	if err := c.SetAddElements(portMapSet(), []nftables.SetElement{portElement(hostIf)}); err != nil {
		return fmt.Errorf("map port %q: %w", hostIf, err)
	}
	return nil
}

// SyncPodQoS brings the interface's table in the pod's namespace to the
// plan in place, as SyncPortQoS does for a host port.
func SyncPodQoS(c *nftables.Conn, ifname string, plan *qos.Plan) (bool, error) {
	t := podTable(ifname)
	if !plan.NeedsRules() {
		found, err := HasAnyPodQoS(c, ifname)
		if err != nil || !found {
			return false, err
		}
		return true, DeletePodQoS(c, ifname)
	}
	chains, sets, hooked, err := readPodTable(c, t)
	if err != nil {
		return false, err
	}
	if !hooked {
		return true, ApplyPodQoS(c, ifname, plan)
	}
	got, err := readOwned(c, t, chains, sets)
	if err != nil {
		return false, err
	}
	want := podRuleset(ifname, plan)
	ch := diff(got, want)
	if ch.empty() {
		return false, nil
	}
	if err := queueChanges(c, t, want, ch); err != nil {
		return false, err
	}
	if err := c.Flush(); err != nil {
		return false, unsupported(fmt.Errorf("update nftables table netdev %s (%s): %w", t.Name, ch, err), PodEgressHook)
	}
	return true, nil
}

// readPodTable lists the chains and sets of an interface's pod table and
// whether its base chain hooks the interface's egress as rendered (false
// when the table is missing).
func readPodTable(c *nftables.Conn, t *nftables.Table) (chains, sets []string, hooked bool, err error) {
	ok, err := tableExists(c, t)
	if err != nil || !ok {
		return nil, nil, false, err
	}
	all, err := c.ListChainsOfTableFamily(t.Family)
	if err != nil {
		return nil, nil, false, fmt.Errorf("list nftables netdev chains: %w", err)
	}
	for _, ch := range all {
		if ch.Table.Name != t.Name {
			continue
		}
		chains = append(chains, ch.Name)
		if ch.Name == podChain {
			hooked = ch.Hooknum != nil && *ch.Hooknum == *nftables.ChainHookEgress
		}
	}
	ss, err := c.GetSets(t)
	if err != nil {
		return nil, nil, false, fmt.Errorf("list sets of nftables table netdev %s: %w", t.Name, err)
	}
	for _, s := range ss {
		sets = append(sets, s.Name)
	}
	return chains, sets, hooked, nil
}

// readOwned reads the rules of the named chains and the elements of the
// named sets of table t.
func readOwned(c *nftables.Conn, t *nftables.Table, chains, sets []string) (owned, error) {
	o := owned{chains: map[string][][]expr.Any{}, sets: map[string][]nftables.SetElement{}}
	for _, name := range chains {
		rules, err := c.GetRules(t, &nftables.Chain{Name: name, Table: t})
		if err != nil {
			return o, fmt.Errorf("list rules of chain %s/%s: %w", t.Name, name, err)
		}
		for _, r := range rules {
			o.chains[name] = append(o.chains[name], r.Exprs)
		}
		if _, ok := o.chains[name]; !ok {
			o.chains[name] = nil // present, empty
		}
	}
	for _, name := range sets {
		s, err := c.GetSetByName(t, name)
		if err != nil {
			return o, fmt.Errorf("nftables set %s/%s: %w", t.Name, name, err)
		}
		els, err := c.GetSetElements(s)
		if err != nil {
			return o, fmt.Errorf("list elements of set %s/%s: %w", t.Name, name, err)
		}
		o.sets[name] = els
	}
	return o, nil
}
