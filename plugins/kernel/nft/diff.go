package nft

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// owned is what one attachment owns of a table, as read from the kernel:
// its chains with their rules and its sets with their elements.
type owned struct {
	chains map[string][][]expr.Any // chain name -> rules, in order
	sets   map[string][]nftables.SetElement
	// held has the chains' rules with their handles when they were read
	// from the kernel (nil when what is owned is a previous rendering).
	held map[string][]heldRule
}

// changes is the difference between what an attachment owns and what its
// plan renders, as the steps of one transaction. An empty changes means the
// kernel already holds the plan and nothing is sent.
type changes struct {
	addChains []*nftables.Chain
	addSets   []setWithElements
	elements  []elementChange
	// rewrite are chains present on both sides whose rules differ, edited
	// rule by rule: edits has each one's edit, planned from its rules as
	// read from the kernel (readHeld reads those the owned state lacked).
	rewrite []*nftables.Chain
	edits   map[string]ruleEdit
	// delChains and delSets go last, once no rule refers to them.
	delChains []string
	delSets   []string
}

// elementChange updates one existing set element by element: the elements
// that stay are never removed, so a peer address that is still selected
// matches throughout.
type elementChange struct {
	set      *nftables.Set
	add, del []nftables.SetElement
}

func (c *changes) empty() bool {
	return len(c.addChains) == 0 && len(c.addSets) == 0 && len(c.elements) == 0 &&
		len(c.rewrite) == 0 && len(c.delChains) == 0 && len(c.delSets) == 0
}

// String summarises the changes for logs and test failures.
func (c *changes) String() string {
	var els int
	for _, e := range c.elements {
		els += len(e.add) + len(e.del)
	}
	return fmt.Sprintf("%d chains added, %d rewritten, %d deleted; %d sets added, %d deleted, %d elements changed",
		len(c.addChains), len(c.rewrite), len(c.delChains), len(c.addSets), len(c.delSets), els)
}

// diff computes the changes that turn got into want. Chains and sets are
// matched by name: a rule's chain and sets are named after its position,
// so an edited rule keeps its chain (and its meter, when the chain's rules
// are unchanged) and a rule whose destinations changed keeps its sets.
func diff(got owned, want *ruleset) *changes {
	c := &changes{}
	wantChains := make(map[string]bool, len(want.chains))
	for _, ch := range want.chains {
		wantChains[ch.Name] = true
		rules, ok := got.chains[ch.Name]
		switch {
		case !ok:
			c.addChains = append(c.addChains, ch)
		case !equalRules(rules, want.rules[ch.Name]):
			c.rewrite = append(c.rewrite, ch)
			if h, ok := got.held[ch.Name]; ok {
				c.planEdit(ch.Name, h, want)
			}
		}
	}
	wantSets := make(map[string]bool, len(want.sets))
	for _, s := range want.sets {
		wantSets[s.set.Name] = true
		els, ok := got.sets[s.set.Name]
		if !ok {
			c.addSets = append(c.addSets, s)
			continue
		}
		if add, del := elementDiff(els, s.elements); len(add)+len(del) > 0 {
			c.elements = append(c.elements, elementChange{set: s.set, add: add, del: del})
		}
	}
	for _, name := range sortedKeys(got.chains) {
		if !wantChains[name] {
			c.delChains = append(c.delChains, name)
		}
	}
	for _, name := range sortedKeys(got.sets) {
		if !wantSets[name] {
			c.delSets = append(c.delSets, name)
		}
	}
	return c
}

// equalRules compares rules read from the kernel with rendered ones.
func equalRules(got, want [][]expr.Any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range want {
		if !sameRule(got[i], want[i]) {
			return false
		}
	}
	return true
}

// elementDiff returns the elements of want missing from got and those of
// got that want lacks, compared by key and interval flag.
func elementDiff(got, want []nftables.SetElement) (add, del []nftables.SetElement) {
	if sameInOrder(got, want) { // two renderings of an unchanged set: no map needed
		return nil, nil
	}
	key := func(e nftables.SetElement) string {
		if e.IntervalEnd {
			return string(e.Key) + "\x01"
		}
		return string(e.Key)
	}
	have := make(map[string]bool, len(got))
	for _, e := range got {
		have[key(e)] = true
	}
	keep := make(map[string]bool, len(want))
	for _, e := range want {
		keep[key(e)] = true
		if !have[key(e)] {
			add = append(add, nftables.SetElement{Key: e.Key, IntervalEnd: e.IntervalEnd})
		}
	}
	for _, e := range got {
		if !keep[key(e)] {
			del = append(del, nftables.SetElement{Key: e.Key, IntervalEnd: e.IntervalEnd})
		}
	}
	// The kernel dumps an interval set's elements from the highest key
	// down; deleting several intervals in that order fails (ENOENT), in the
	// order nft sends them (ascending, a start before its end) it works.
	slices.SortStableFunc(del, func(a, b nftables.SetElement) int { return bytes.Compare(a.Key, b.Key) })
	return add, del
}

// sameInOrder reports whether two element lists are equal element by
// element, by key and interval flag.
func sameInOrder(a, b []nftables.SetElement) bool {
	if len(a) > 0 && len(a) == len(b) && &a[0] == &b[0] { // one rendering (elementCache)
		return true
	}
	return slices.EqualFunc(a, b, func(x, y nftables.SetElement) bool {
		return x.IntervalEnd == y.IntervalEnd && bytes.Equal(x.Key, y.Key)
	})
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// planEdit records the edit of a chain whose rules the kernel holds.
func (c *changes) planEdit(chain string, held []heldRule, want *ruleset) {
	if c.edits == nil {
		c.edits = map[string]ruleEdit{}
	}
	c.edits[chain] = planEdit(held, want.rules[chain])
}

// readHeld reads the rules, with their handles, of the chains to rewrite
// whose edit is not planned yet (what was owned was a rendering), and
// plans it.
func (c *changes) readHeld(conn *nftables.Conn, t *nftables.Table, want *ruleset) error {
	for _, chain := range c.rewrite {
		if _, ok := c.edits[chain.Name]; ok {
			continue
		}
		held, err := readHeld(conn, t, chain.Name)
		if err != nil {
			return err
		}
		c.planEdit(chain.Name, held, want)
	}
	return nil
}

// queueChanges adds the changes to c's pending batch in an order the kernel
// accepts: what is referred to is created before what refers to it, and
// deleted after.
func queueChanges(c *nftables.Conn, t *nftables.Table, want *ruleset, ch *changes) error {
	for _, chain := range ch.addChains {
		c.AddChain(chain)
	}
	for _, s := range ch.addSets {
		if err := c.AddSet(s.set, s.elements); err != nil {
			return fmt.Errorf("add set %q: %w", s.set.Name, err)
		}
	}
	for _, e := range ch.elements {
		if len(e.del) > 0 {
			if err := c.SetDeleteElements(e.set, e.del); err != nil {
				return fmt.Errorf("delete elements of set %q: %w", e.set.Name, err)
			}
		}
		if len(e.add) > 0 {
			if err := c.SetAddElements(e.set, e.add); err != nil {
				return fmt.Errorf("add elements to set %q: %w", e.set.Name, err)
			}
		}
	}
	for _, chain := range ch.addChains {
		for _, exprs := range want.rules[chain.Name] {
			c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: exprs})
		}
	}
	for _, chain := range ch.rewrite {
		e, ok := ch.edits[chain.Name]
		if !ok {
			return fmt.Errorf("the rules of chain %s/%s were not read (readHeld)", t.Name, chain.Name)
		}
		if err := queueEdit(c, t, chain, e); err != nil {
			return err
		}
	}
	for _, name := range ch.delChains {
		c.DelChain(&nftables.Chain{Name: name, Table: t})
	}
	for _, name := range ch.delSets {
		c.DelSet(&nftables.Set{Name: name, Table: t})
	}
	return nil
}
