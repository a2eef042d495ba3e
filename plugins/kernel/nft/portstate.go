package nft

import (
	"bytes"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// portState is what the shared table holds, read before a transaction so
// that it deletes exactly what exists (a batch that deletes a missing
// object fails as a whole).
type portState struct {
	table   bool          // the shared table exists
	baseOK  bool          // its base chain and map are as rendered
	mapSet  *nftables.Set // the map as read; nil: missing
	element *expr.Verdict // the host end's entry in the map; nil: none
	chains  []string      // the port's chains, its main chain first
	sets    []string      // the port's sets
}

// readPort reads the shared table's state as far as hostIf is concerned.
func readPort(c *nftables.Conn, hostIf string) (*portState, error) {
	st := &portState{}
	t := portTable()
	ok, err := tableExists(c, t)
	if err != nil || !ok {
		return st, err
	}
	st.table = true
	base, err := st.readChains(c, hostIf)
	if err != nil {
		return nil, err
	}
	if err := st.readSets(c, hostIf); err != nil {
		return nil, err
	}
	if st.mapSet == nil {
		return st, nil
	}
	if err := st.readElement(c, hostIf); err != nil {
		return nil, err
	}
	if base == nil {
		return st, nil
	}
	want := baseRuleset()
	if !sameHook(base, want.chains[0]) {
		return st, nil
	}
	rules, err := c.GetRules(t, base)
	if err != nil {
		return nil, fmt.Errorf("list rules of chain bridge %s %s: %w", t.Name, portBase, err)
	}
	st.baseOK = sameRules(rules, want.rules[portBase]) == nil
	return st, nil
}

// readChains records the port's chains and returns the base chain, if any.
func (st *portState) readChains(c *nftables.Conn, hostIf string) (*nftables.Chain, error) {
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyBridge)
	if err != nil {
		return nil, fmt.Errorf("list nftables bridge chains: %w", err)
	}
	var base *nftables.Chain
	for _, ch := range chains {
		switch {
		case ch.Table.Name != PortQoSTable:
		case ch.Name == portBase:
			base = ch
		case ch.Name == PortChain(hostIf):
			st.chains = append([]string{ch.Name}, st.chains...)
		case ownedBy(ch.Name, hostIf):
			st.chains = append(st.chains, ch.Name)
		}
	}
	return base, nil
}

func (st *portState) readSets(c *nftables.Conn, hostIf string) error {
	sets, err := c.GetSets(portTable())
	if err != nil {
		return fmt.Errorf("list sets of nftables table bridge %s: %w", PortQoSTable, err)
	}
	for _, s := range sets {
		switch {
		case s.Name == portMap && s.IsMap:
			// google/nftables v0.3.0 reads a verdict map's data type into
			// KeyType: the types cannot be told apart here. The base rule
			// (a verdict lookup) only loads into a map of verdicts anyway.
			st.mapSet = s
		case ownedBy(s.Name, hostIf):
			st.sets = append(st.sets, s.Name)
		}
	}
	return nil
}

func (st *portState) readElement(c *nftables.Conn, hostIf string) error {
	els, err := c.GetSetElements(st.mapSet)
	if err != nil {
		return fmt.Errorf("list the entries of nftables map bridge %s %s: %w", PortQoSTable, portMap, err)
	}
	for _, e := range els {
		if !bytes.Equal(e.Key, ifname(hostIf)) {
			continue
		}
		if st.element, err = parseVerdict(e.Val); err != nil {
			st.element = &expr.Verdict{} // unreadable, but there to delete (and not what CHECK wants)
		}
	}
	return nil
}

func sameHook(got, want *nftables.Chain) bool {
	return got.Hooknum != nil && got.Priority != nil && got.Type == want.Type &&
		*got.Hooknum == *want.Hooknum && *got.Priority == *want.Priority
}

// queueDelete adds to the batch the deletion of everything the port has,
// in an order the kernel accepts (what refers to an object goes first), and
// reports whether there was anything.
func (st *portState) queueDelete(c *nftables.Conn, hostIf string) (bool, error) {
	t := portTable()
	if st.element != nil {
		if err := c.SetDeleteElements(st.mapSet, []nftables.SetElement{{Key: ifname(hostIf)}}); err != nil {
			return false, fmt.Errorf("unmap port %q: %w", hostIf, err)
		}
	}
	for _, name := range st.chains {
		c.DelChain(&nftables.Chain{Name: name, Table: t})
	}
	for _, name := range st.sets {
		c.DelSet(&nftables.Set{Name: name, Table: t})
	}
	return st.element != nil || len(st.chains) > 0 || len(st.sets) > 0, nil
}
