package nft

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// sharedTable is a host table that many ports share (the port guard, the
// host side of NetworkPolicy): base chains whose rules send each packet
// through verdict maps to the chains of the port it belongs to, so a packet
// costs one map lookup however many ports the host has. A port (a host
// end: interface names never hold '/') owns the chains and sets named
// <prefix><port> or <prefix><port>/..., for each of the table's prefixes,
// and the map elements whose verdict jumps to one of its chains; sync
// brings each port's objects to what it is to hold, in few transactions,
// sending only the differences.
type sharedTable struct {
	table    *nftables.Table
	maps     []*nftables.Set // IDs 1..len(maps)
	sets     []*nftables.Set // the table's own plain sets, IDs after the maps'
	bases    []*nftables.Chain
	rules    map[string][][]expr.Any // base chain -> rules
	prefixes []string
	feature  string // what a failing transaction may lack ("": nothing to name)
}

// portObjects is what one port is to hold: its chains and sets (rs, whose
// set IDs follow the maps'), and its elements of each map.
type portObjects struct {
	rs       *ruleset
	elements map[string][]nftables.SetElement // map name -> elements, with VerdictData
}

// empty reports whether the port has nothing in the table.
func (p *portObjects) empty() bool {
	return len(p.rs.chains) == 0 && len(p.rs.sets) == 0 && len(p.elements) == 0
}

// newPort returns an empty portObjects of the table, its set IDs after lastSet.
func (s *sharedTable) newPort(lastSet uint32) *portObjects {
	return &portObjects{
		rs:       &ruleset{table: s.table, rules: map[string][][]expr.Any{}, lastSet: max(lastSet, s.baseSets())},
		elements: map[string][]nftables.SetElement{},
	}
}

// baseSets is the number of set IDs the table's own maps and sets take.
func (s *sharedTable) baseSets() uint32 { return uint32(len(s.maps) + len(s.sets)) }

// mapSet returns the table's map of that name.
func (s *sharedTable) mapSet(name string) *nftables.Set {
	for _, m := range s.maps {
		if m.Name == name {
			return m
		}
	}
	panic("nft: no map " + name + " in table " + s.table.Name)
}

// owner returns the port a chain or set belongs to ("" for the table's own).
func (s *sharedTable) owner(name string) string {
	for _, p := range s.prefixes {
		if rest, ok := strings.CutPrefix(name, p); ok {
			port, _, _ := strings.Cut(rest, "/")
			return port
		}
	}
	return ""
}

// queueBase (re)creates the table's shared part: the table, its maps (kept
// with their elements when present) and base chains, whose rules are
// replaced by the ones rendered.
func (s *sharedTable) queueBase(c *nftables.Conn) error {
	c.AddTable(s.table)
	for _, m := range append(slices.Clone(s.maps), s.sets...) {
		if err := c.AddSet(m, nil); err != nil {
			return fmt.Errorf("add map %q: %w", m.Name, err)
		}
	}
	for _, ch := range s.bases {
		c.AddChain(ch)
		c.FlushChain(ch)
		for _, exprs := range s.rules[ch.Name] {
			c.AddRule(&nftables.Rule{Table: s.table, Chain: ch, Exprs: exprs})
		}
	}
	return nil
}

// elementChanges compares a port's map elements, by key and verdict.
func (s *sharedTable) elementChanges(got, want map[string][]nftables.SetElement) (del, add map[string][]nftables.SetElement) {
	del, add = map[string][]nftables.SetElement{}, map[string][]nftables.SetElement{}
	for _, m := range s.maps {
		for _, g := range got[m.Name] {
			if !slices.ContainsFunc(want[m.Name], func(w nftables.SetElement) bool { return sameElement(g, w) }) {
				del[m.Name] = append(del[m.Name], nftables.SetElement{Key: g.Key})
			}
		}
		for _, w := range want[m.Name] {
			if !slices.ContainsFunc(got[m.Name], func(g nftables.SetElement) bool { return sameElement(g, w) }) {
				add[m.Name] = append(add[m.Name], w)
			}
		}
	}
	for name, els := range del {
		if len(els) == 0 {
			delete(del, name)
		}
	}
	for name, els := range add {
		if len(els) == 0 {
			delete(add, name)
		}
	}
	return del, add
}

func sameElement(a, b nftables.SetElement) bool {
	return bytes.Equal(a.Key, b.Key) && a.VerdictData != nil && b.VerdictData != nil &&
		a.VerdictData.Kind == b.VerdictData.Kind && a.VerdictData.Chain == b.VerdictData.Chain
}

func (s *sharedTable) queueElements(c *nftables.Conn, els map[string][]nftables.SetElement, op func(*nftables.Set, []nftables.SetElement) error) error {
	for _, name := range sortedKeys(els) {
		if err := op(s.mapSet(name), els[name]); err != nil {
			return fmt.Errorf("map %s of nftables table %s: %w", name, s.table.Name, err)
		}
	}
	return nil
}

// check verifies that the table's base is as rendered and that the port
// holds exactly want (chains, sets and map elements).
func (s *sharedTable) check(c *nftables.Conn, port string, want *portObjects) error {
	st, err := s.read(c)
	switch {
	case err != nil:
		return err
	case !st.present && want.empty():
		return nil // nothing of the port's belongs here, and no port made the table yet
	case !st.present:
		return fmt.Errorf("nftables table %s is missing", s.table.Name)
	case !st.baseOK:
		return fmt.Errorf("nftables table %s: its base chains or maps differ from netclass's", s.table.Name)
	}
	if del, add := s.elementChanges(st.elements[port], want.elements); len(del)+len(add) > 0 {
		return fmt.Errorf("nftables table %s: the map entries of port %q differ from the configuration", s.table.Name, port)
	}
	var errs []error
	for _, name := range st.chains[port] {
		if _, ok := want.rs.rules[name]; !ok && !slices.ContainsFunc(want.rs.chains, func(ch *nftables.Chain) bool { return ch.Name == name }) {
			errs = append(errs, fmt.Errorf("nftables table %s: chain %s is not in the configuration", s.table.Name, name))
		}
	}
	return errors.Join(append(errs, verify(c, want.rs))...)
}
