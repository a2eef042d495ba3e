package nft

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// sync brings each port to what wants says it is to hold (nil: nothing),
// in as few transactions as their differences fit (transaction); a failed
// transaction's ports are retried one by one, so one port's failure holds
// up no other. Ports missing from wants are not touched.
func (s *sharedTable) sync(c *nftables.Conn, wants map[string]*portObjects) map[string]PortResult {
	return s.syncFrom(c, wants, nil)
}

// syncFrom is sync where prevs, when it has a port, is what the port holds
// (its last sync's rendering): its chains and sets are not read back, but
// for the rules of a chain that changes.
//
// The ports go the smallest first, each port's differences computed as
// its turn comes and committed once the next port's would not fit the
// transaction: a tenant whose policies are huge has its ports synced last
// and delays no other's by more than its own ports' cost, and an edit of
// a few set elements of 100 ports is one transaction.
func (s *sharedTable) syncFrom(c *nftables.Conn, wants, prevs map[string]*portObjects) map[string]PortResult {
	out := make(map[string]PortResult, len(wants))
	st, err := s.read(c)
	if err != nil {
		for p := range wants {
			out[p] = PortResult{Err: err}
		}
		return out
	}
	var tx transaction
	lastSet := s.baseSets() // set IDs unique in the sync, so in each of its transactions
	for _, p := range cheapFirst(wants) {
		want := wants[p]
		if want == nil {
			want = s.newPort(lastSet)
		} else {
			want = s.renumber(want, lastSet)
		}
		lastSet = want.rs.lastSet
		pc, err := s.change(c, st, p, want, prevs[p])
		switch {
		case err != nil:
			out[p] = PortResult{Err: err}
			continue
		case pc.ch.empty() && len(pc.del) == 0 && len(pc.add) == 0:
			out[p] = PortResult{}
			continue
		case !tx.fits(pc):
			s.commit(c, st, wants, tx.changes, out)
			tx = transaction{}
		}
		tx.add(pc)
	}
	if len(tx.changes) > 0 {
		s.commit(c, st, wants, tx.changes, out)
	}
	return out
}

// portChange is one port's differences from what it holds: its chains and
// sets (ch, from want.rs) and its map elements.
type portChange struct {
	port     string
	want     *portObjects
	ch       *changes
	del, add map[string][]nftables.SetElement
	// fromPrev: computed from the port's last rendering, not from the kernel.
	fromPrev bool
}

// change computes one port's differences, reading the rules of the chains
// that change when prev stood for them.
func (s *sharedTable) change(c *nftables.Conn, st *sharedState, port string, want, prev *portObjects) (portChange, error) {
	got, fromPrev, err := s.holds(c, st, port, prev)
	if err != nil {
		return portChange{}, err
	}
	pc := portChange{port: port, want: want, ch: diff(got, want.rs), fromPrev: fromPrev}
	if err := pc.ch.readHeld(c, s.table, want.rs); err != nil {
		return portChange{}, err
	}
	pc.del, pc.add = s.elementChanges(st.elements[port], want.elements)
	return pc, nil
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
// sends, so that its messages (held in memory until sent) stay small, and
// maxMessagesPerTransaction its messages, each acknowledged by the kernel
// into the socket's receive buffer (socketBuffer).
const (
	maxOpsPerTransaction      = 20000
	maxMessagesPerTransaction = 2048
)

// transaction gathers port changes up to maxOpsPerTransaction and
// maxMessagesPerTransaction, counted by what the changes send, not by what
// their ports hold.
type transaction struct {
	changes   []portChange
	ops, msgs int
}

// fits reports whether pc can join the transaction (an empty one takes
// any change, however large).
func (tx *transaction) fits(pc portChange) bool {
	o, m := pc.cost()
	return len(tx.changes) == 0 || tx.ops+o <= maxOpsPerTransaction && tx.msgs+m <= maxMessagesPerTransaction
}

func (tx *transaction) add(pc portChange) {
	o, m := pc.cost()
	tx.changes = append(tx.changes, pc)
	tx.ops, tx.msgs = tx.ops+o, tx.msgs+m
}

// cost is the rules and set elements the change sends, and (at most) the
// messages they take.
func (pc portChange) cost() (ops, msgs int) {
	ch := pc.ch
	msgs = len(ch.addChains) + 2*len(ch.addSets) + 2*len(ch.elements) + len(ch.delChains) + len(ch.delSets) + len(pc.del) + len(pc.add)
	ops = msgs
	for _, chain := range ch.addChains {
		ops += len(pc.want.rs.rules[chain.Name])
		msgs += len(pc.want.rs.rules[chain.Name])
	}
	for _, e := range ch.edits {
		n := len(e.del) + len(e.insert)
		ops, msgs = ops+n, msgs+n
	}
	for _, set := range ch.addSets {
		ops += len(set.elements)
	}
	for _, e := range ch.elements {
		ops += len(e.add) + len(e.del)
	}
	for _, els := range pc.add {
		ops += len(els)
	}
	return ops, msgs
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

// commit sends the changes in one transaction (with the table's base,
// when it needs repair).
func (s *sharedTable) commit(c *nftables.Conn, st *sharedState, wants map[string]*portObjects, pending []portChange, out map[string]PortResult) {
	var err error
	if !st.baseOK {
		err = s.queueBase(c)
	}
	for _, pc := range pending {
		if err == nil {
			err = s.queueChange(c, pc)
		}
	}
	if err == nil {
		err = c.Flush()
	}
	// Each on its own, the state read again: one port's failure holds up no
	// other, and a port whose last rendering no longer stands for what the
	// kernel holds (another writer changed it, or a sync failed half-way
	// through the node's two tables) is brought to what it is to be at once.
	if err != nil && (len(pending) > 1 || pending[0].fromPrev) {
		for _, pc := range pending {
			out[pc.port] = s.sync(c, map[string]*portObjects{pc.port: wants[pc.port]})[pc.port]
		}
		return
	}
	if err != nil {
		out[pending[0].port] = PortResult{Err: s.wrap(fmt.Errorf("update port %q in nftables table %s: %w", pending[0].port, s.table.Name, err))}
		return
	}
	st.present, st.baseOK = true, true
	now := time.Now()
	for _, pc := range pending {
		out[pc.port] = PortResult{Changed: true, At: now}
	}
}

func (s *sharedTable) wrap(err error) error {
	if s.feature == "" {
		return err
	}
	return unsupported(err, s.feature)
}

// queueChange adds a port's differences to the batch: map elements that
// go before the chains they jump to, those that come after them.
func (s *sharedTable) queueChange(c *nftables.Conn, pc portChange) error {
	if err := s.queueElements(c, pc.del, c.SetDeleteElements); err != nil {
		return err
	}
	if err := queueChanges(c, s.table, pc.want.rs, pc.ch); err != nil {
		return err
	}
	return s.queueElements(c, pc.add, c.SetAddElements)
}

// holds is what the port holds: prev's rendering when given (the chains
// and sets the table lists for the port must be exactly prev's, or it is
// read), else read from the kernel.
func (s *sharedTable) holds(c *nftables.Conn, st *sharedState, port string, prev *portObjects) (owned, bool, error) {
	if prev != nil && prev.names(st, port) {
		o := owned{chains: map[string][][]expr.Any{}, sets: map[string][]nftables.SetElement{}}
		for _, ch := range prev.rs.chains {
			o.chains[ch.Name] = prev.rs.rules[ch.Name]
		}
		for _, set := range prev.rs.sets {
			o.sets[set.set.Name] = set.elements
		}
		return o, true, nil
	}
	o, err := readOwned(c, s.table, st.chains[port], st.sets[port])
	return o, false, err
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

// renumber gives a port's sets IDs after lastSet, unique in the sync.
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
