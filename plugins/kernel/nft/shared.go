package nft

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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

// sync brings each port to what wants says it is to hold (nil: nothing),
// at most maxPortsPerTransaction ports per transaction; a failed
// transaction's ports are retried one by one, so one port's failure holds
// up no other. Ports missing from wants are not touched.
func (s *sharedTable) sync(c *nftables.Conn, wants map[string]*portObjects) map[string]PortResult {
	return s.syncFrom(c, wants, nil)
}

// syncFrom is sync where prevs, when it has a port, is what the port holds
// (its last sync's rendering): its chains and sets are not read back.
func (s *sharedTable) syncFrom(c *nftables.Conn, wants, prevs map[string]*portObjects) map[string]PortResult {
	out := make(map[string]PortResult, len(wants))
	st, err := s.read(c)
	if err != nil {
		for p := range wants {
			out[p] = PortResult{Err: err}
		}
		return out
	}
	ports := cheapFirst(wants)
	for len(ports) > 0 {
		n := chunk(ports, wants)
		s.syncChunk(c, st, wants, prevs, ports[:n], out)
		ports = ports[n:]
	}
	return out
}

// cheapFirst orders the ports by the size of what they are to hold, the
// smallest first: a tenant whose policies are huge has its ports synced
// last, and delays no other's by more than its own ports' cost.
func cheapFirst(wants map[string]*portObjects) []string {
	ports := sortedKeys(wants)
	slices.SortStableFunc(ports, func(a, b string) int { return wants[a].size() - wants[b].size() })
	return ports
}

// maxOpsPerTransaction bounds the rules and set elements one transaction
// sends, so that its messages (held in memory until sent) stay small.
const maxOpsPerTransaction = 20000

// chunk returns how many of the ports go in the next transaction: up to
// maxPortsPerTransaction, and no more than maxOpsPerTransaction rules and
// elements (at least one port).
func chunk(ports []string, wants map[string]*portObjects) int {
	ops := 0
	for i, p := range ports {
		ops += wants[p].size()
		if i > 0 && (i == maxPortsPerTransaction || ops > maxOpsPerTransaction) {
			return i
		}
	}
	return len(ports)
}

// size is the number of rules and set elements the port is to hold (1
// for nothing: removing costs something too).
func (p *portObjects) size() int {
	if p == nil {
		return 1
	}
	n := 1
	for _, r := range p.rs.rules {
		n += len(r)
	}
	for _, set := range p.rs.sets {
		n += len(set.elements)
	}
	return n
}

func (s *sharedTable) syncChunk(c *nftables.Conn, st *sharedState, wants, prevs map[string]*portObjects, ports []string, out map[string]PortResult) {
	changed, err := s.queuePorts(c, st, wants, prevs, ports)
	if err == nil && len(changed) == 0 {
		for _, p := range ports {
			out[p] = PortResult{}
		}
		return
	}
	if err == nil {
		err = c.Flush()
	}
	if err != nil && len(ports) > 1 {
		for _, p := range ports { // each on its own, the state read again
			out[p] = s.sync(c, map[string]*portObjects{p: wants[p]})[p]
		}
		return
	}
	if err != nil {
		out[ports[0]] = PortResult{Err: s.wrap(fmt.Errorf("update port %q in nftables table %s: %w", ports[0], s.table.Name, err))}
		return
	}
	st.present, st.baseOK = true, true
	now := time.Now()
	for _, p := range ports {
		r := PortResult{Changed: changed[p]}
		if r.Changed {
			r.At = now
		}
		out[p] = r
	}
}

func (s *sharedTable) wrap(err error) error {
	if s.feature == "" {
		return err
	}
	return unsupported(err, s.feature)
}

// queuePorts adds the ports' differences to the batch (and the table's
// base, when it needs repair and anything changes) and returns the ports
// that have any.
func (s *sharedTable) queuePorts(c *nftables.Conn, st *sharedState, wants, prevs map[string]*portObjects, ports []string) (map[string]bool, error) {
	changed := map[string]bool{}
	lastSet := s.baseSets()
	for _, p := range ports {
		want := wants[p]
		if want == nil {
			want = s.newPort(lastSet)
		} else {
			want = s.renumber(want, lastSet)
		}
		lastSet = want.rs.lastSet
		got, err := s.holds(c, st, p, prevs[p])
		if err != nil {
			return nil, err
		}
		ch := diff(got, want.rs)
		del, add := s.elementChanges(st.elements[p], want.elements)
		if ch.empty() && len(del) == 0 && len(add) == 0 {
			continue
		}
		if !st.baseOK && len(changed) == 0 {
			if err := s.queueBase(c); err != nil {
				return nil, err
			}
		}
		changed[p] = true
		if err := s.queueElements(c, del, c.SetDeleteElements); err != nil {
			return nil, err
		}
		if err := queueChanges(c, s.table, want.rs, ch); err != nil {
			return nil, err
		}
		if err := s.queueElements(c, add, c.SetAddElements); err != nil {
			return nil, err
		}
	}
	return changed, nil
}

// holds is what the port holds: prev's rendering when given (the chains
// and sets the table lists for the port must be exactly prev's, or it is
// read), else read from the kernel.
func (s *sharedTable) holds(c *nftables.Conn, st *sharedState, port string, prev *portObjects) (owned, error) {
	if prev != nil && prev.names(st, port) {
		o := owned{chains: map[string][][]expr.Any{}, sets: map[string][]nftables.SetElement{}}
		for _, ch := range prev.rs.chains {
			o.chains[ch.Name] = prev.rs.rules[ch.Name]
		}
		for _, set := range prev.rs.sets {
			o.sets[set.set.Name] = set.elements
		}
		return o, nil
	}
	return readOwned(c, s.table, st.chains[port], st.sets[port])
}

// names reports whether the table lists exactly the port's chains and sets
// of p (a cheap check that the kernel still has what was last applied).
func (p *portObjects) names(st *sharedState, port string) bool {
	if len(p.rs.chains) != len(st.chains[port]) || len(p.rs.sets) != len(st.sets[port]) {
		return false
	}
	for _, ch := range p.rs.chains {
		if !slices.Contains(st.chains[port], ch.Name) {
			return false
		}
	}
	for _, set := range p.rs.sets {
		if !slices.Contains(st.sets[port], set.set.Name) {
			return false
		}
	}
	return true
}

// renumber gives a port's sets IDs after lastSet, unique in the transaction.
func (s *sharedTable) renumber(p *portObjects, lastSet uint32) *portObjects {
	rs := *p.rs
	rs.sets = make([]setWithElements, len(p.rs.sets))
	rs.rules = make(map[string][][]expr.Any, len(p.rs.rules))
	ids := map[uint32]uint32{}
	for i, sw := range p.rs.sets {
		set := *sw.set
		lastSet++
		ids[set.ID], set.ID = lastSet, lastSet
		rs.sets[i] = setWithElements{set: &set, elements: sw.elements}
	}
	for name, rules := range p.rs.rules {
		for _, r := range rules {
			rs.rules[name] = append(rs.rules[name], withSetIDs(r, ids))
		}
	}
	rs.lastSet = lastSet
	return &portObjects{rs: &rs, elements: p.elements}
}

func withSetIDs(exprs []expr.Any, ids map[uint32]uint32) []expr.Any {
	out := slices.Clone(exprs)
	for i, e := range out {
		if l, ok := e.(*expr.Lookup); ok && ids[l.SetID] != 0 {
			cp := *l
			cp.SetID = ids[l.SetID]
			out[i] = &cp
		}
	}
	return out
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
