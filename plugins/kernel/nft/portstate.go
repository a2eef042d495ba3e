package nft

import (
	"bytes"
	"fmt"
	"strings"

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

// tableState is what the shared table holds for every port, read once.
type tableState struct {
	table    bool
	baseOK   bool
	mapSet   *nftables.Set
	elements map[string]*expr.Verdict // host end -> its map entry
	chains   map[string][]string      // host end -> its chains, main first
	sets     map[string][]string      // host end -> its sets
}

// port is the state of one host end's port.
func (ts *tableState) port(hostIf string) *portState {
	return &portState{table: ts.table, baseOK: ts.baseOK, mapSet: ts.mapSet,
		element: ts.elements[hostIf], chains: ts.chains[hostIf], sets: ts.sets[hostIf]}
}

// readPort reads the shared table's state as far as hostIf is concerned.
func readPort(c *nftables.Conn, hostIf string) (*portState, error) {
	ts, err := readTable(c)
	if err != nil {
		return nil, err
	}
	return ts.port(hostIf), nil
}

// readTable reads the shared table: its base, its map and every port's
// chains and sets (one dump of each kind, whatever the number of ports).
func readTable(c *nftables.Conn) (*tableState, error) {
	ts := &tableState{elements: map[string]*expr.Verdict{}, chains: map[string][]string{}, sets: map[string][]string{}}
	t := portTable()
	ok, err := tableExists(c, t)
	if err != nil || !ok {
		return ts, err
	}
	ts.table = true
	base, err := ts.readChains(c)
	if err != nil {
		return nil, err
	}
	if err := ts.readSets(c); err != nil {
		return nil, err
	}
	if ts.mapSet == nil {
		return ts, nil
	}
	if err := ts.readElements(c); err != nil {
		return nil, err
	}
	if base == nil {
		return ts, nil
	}
	want := baseRuleset()
	if !sameHook(base, want.chains[0]) {
		return ts, nil
	}
	rules, err := c.GetRules(t, base)
	if err != nil {
		return nil, fmt.Errorf("list rules of chain bridge %s %s: %w", t.Name, portBase, err)
	}
	ts.baseOK = sameRules(rules, want.rules[portBase]) == nil
	return ts, nil
}

// portOf returns the host end a chain or set name belongs to ("" for the
// table's own objects).
func portOf(name string) string {
	rest, ok := strings.CutPrefix(name, "port/")
	if !ok {
		return ""
	}
	hostIf, _, _ := strings.Cut(rest, "/")
	return hostIf
}

// readChains records every port's chains and returns the base chain, if any.
func (ts *tableState) readChains(c *nftables.Conn) (*nftables.Chain, error) {
	chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyBridge)
	if err != nil {
		return nil, fmt.Errorf("list nftables bridge chains: %w", err)
	}
	var base *nftables.Chain
	for _, ch := range chains {
		if ch.Table.Name != PortQoSTable {
			continue
		}
		if ch.Name == portBase {
			base = ch
			continue
		}
		h := portOf(ch.Name)
		if h == "" {
			continue
		}
		if ch.Name == PortChain(h) {
			ts.chains[h] = append([]string{ch.Name}, ts.chains[h]...)
		} else {
			ts.chains[h] = append(ts.chains[h], ch.Name)
		}
	}
	return base, nil
}

func (ts *tableState) readSets(c *nftables.Conn) error {
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
			ts.mapSet = s
		case portOf(s.Name) != "":
			ts.sets[portOf(s.Name)] = append(ts.sets[portOf(s.Name)], s.Name)
		}
	}
	return nil
}

func (ts *tableState) readElements(c *nftables.Conn) error {
	els, err := c.GetSetElements(ts.mapSet)
	if err != nil {
		return fmt.Errorf("list the entries of nftables map bridge %s %s: %w", PortQoSTable, portMap, err)
	}
	for _, e := range els {
		h := string(bytes.TrimRight(e.Key, "\x00"))
		v, err := parseVerdict(e.Val)
		if err != nil {
			v = &expr.Verdict{} // unreadable, but there to delete (and not what CHECK wants)
		}
		ts.elements[h] = v
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
