package nft

import (
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// sharedState is what the table holds, read once for a sync.
type sharedState struct {
	present  bool
	baseOK   bool
	chains   map[string][]string                         // port -> chain names
	sets     map[string][]string                         // port -> set names
	elements map[string]map[string][]nftables.SetElement // port -> map -> elements (VerdictData parsed)
}

// read reads the table's state: one dump of chains, one of sets, one of
// each map's elements and of each base chain's rules, whatever the number
// of ports.
func (s *sharedTable) read(c *nftables.Conn) (*sharedState, error) {
	st := &sharedState{chains: map[string][]string{}, sets: map[string][]string{}, elements: map[string]map[string][]nftables.SetElement{}}
	ok, err := tableExists(c, s.table)
	if err != nil || !ok {
		return st, err
	}
	st.present = true
	baseOK, err := s.readChains(c, st)
	if err != nil {
		return nil, err
	}
	mapsOK, err := s.readSets(c, st)
	if err != nil {
		return nil, err
	}
	st.baseOK = baseOK && mapsOK
	return st, nil
}

func (s *sharedTable) readChains(c *nftables.Conn, st *sharedState) (bool, error) {
	chains, err := c.ListChainsOfTableFamily(s.table.Family)
	if err != nil {
		return false, fmt.Errorf("list nftables chains: %w", err)
	}
	found := map[string]*nftables.Chain{}
	for _, ch := range chains {
		if ch.Table.Name != s.table.Name {
			continue
		}
		if p := s.owner(ch.Name); p != "" {
			st.chains[p] = append(st.chains[p], ch.Name)
		} else {
			found[ch.Name] = ch
		}
	}
	for _, want := range s.bases {
		got := found[want.Name]
		if got == nil || !sameHook(got, want) {
			return false, nil
		}
		rules, err := c.GetRules(s.table, got)
		if err != nil {
			return false, fmt.Errorf("list rules of chain %s %s: %w", s.table.Name, want.Name, err)
		}
		if sameRules(rules, s.rules[want.Name]) != nil {
			return false, nil
		}
	}
	return true, nil
}

// readSets records the ports' sets and the maps' elements by owner, and
// reports whether every map is there.
func (s *sharedTable) readSets(c *nftables.Conn, st *sharedState) (bool, error) {
	sets, err := c.GetSets(s.table)
	if err != nil {
		return false, fmt.Errorf("list sets of nftables table %s: %w", s.table.Name, err)
	}
	found := 0
	for _, set := range sets {
		if p := s.owner(set.Name); p != "" {
			st.sets[p] = append(st.sets[p], set.Name)
			continue
		}
		if slices.ContainsFunc(s.sets, func(b *nftables.Set) bool { return b.Name == set.Name && !set.IsMap }) {
			found++
		}
		if !slices.ContainsFunc(s.maps, func(m *nftables.Set) bool { return m.Name == set.Name }) || !set.IsMap {
			continue
		}
		found++
		if err := s.readElements(c, set, st); err != nil {
			return false, err
		}
	}
	return found == len(s.maps)+len(s.sets), nil
}

func (s *sharedTable) readElements(c *nftables.Conn, m *nftables.Set, st *sharedState) error {
	els, err := c.GetSetElements(m)
	if err != nil {
		return fmt.Errorf("list the entries of nftables map %s %s: %w", s.table.Name, m.Name, err)
	}
	for _, e := range els {
		v, err := parseVerdict(e.Val)
		if err != nil {
			v = &expr.Verdict{} // unreadable: owned by nobody, never deleted by a port's sync
		}
		p := s.owner(v.Chain)
		if p == "" {
			continue
		}
		if st.elements[p] == nil {
			st.elements[p] = map[string][]nftables.SetElement{}
		}
		st.elements[p][m.Name] = append(st.elements[p][m.Name], nftables.SetElement{Key: e.Key, VerdictData: v})
	}
	return nil
}

// has reports whether the port owns anything in the table.
func (st *sharedState) has(port string) bool {
	return len(st.chains[port]) > 0 || len(st.sets[port]) > 0 || len(st.elements[port]) > 0
}
