package nft

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// heldRule is a rule as the kernel holds it: its handle and expressions.
type heldRule struct {
	handle uint64
	exprs  []expr.Any
}

// ruleEdit is what turns a chain's rules into the rendered ones rule by
// rule, instead of flushing the chain and sending every rule again: a
// policy edit usually changes one rule of a port's ~30, and the kernel
// then compiles one rule rather than the chain. The rules the two share at
// the chain's start and end stay, with their state (a meter's); the ones
// between are deleted by handle and the rendered ones inserted in their
// place, all in one transaction: no packet sees a half-edited chain.
//
// Rules are not replaced by handle (NLM_F_REPLACE), which would send one
// message where this sends two: google/nftables v0.3.0 asks every new rule
// to be echoed and reads one answer per message, and the kernel's answers
// to a batch of replaced rules do not come in that order (Flush failed
// with "expected header error, but got unknown(2566)", a NEWRULE echo,
// after a transaction that had committed, and the connection was left
// with unread answers).
type ruleEdit struct {
	del []uint64
	// insert are new rules, in order, before the rule of handle before
	// (0: at the chain's end).
	insert [][]expr.Any
	before uint64
}

// planEdit computes the edit that turns got into want.
func planEdit(got []heldRule, want [][]expr.Any) ruleEdit {
	p := 0
	for p < len(got) && p < len(want) && sameRule(got[p].exprs, want[p]) {
		p++
	}
	s := 0
	for s < len(got)-p && s < len(want)-p && sameRule(got[len(got)-1-s].exprs, want[len(want)-1-s]) {
		s++
	}
	var e ruleEdit
	for _, r := range got[p : len(got)-s] {
		e.del = append(e.del, r.handle)
	}
	e.insert = want[p : len(want)-s]
	if len(e.insert) > 0 && s > 0 {
		e.before = got[len(got)-s].handle
	}
	return e
}

// sameRule compares a rule read from the kernel with a rendered one (or
// two renderings), expression by expression, without copying them.
func sameRule(got, want []expr.Any) bool {
	return slices.EqualFunc(got, want, sameExpr)
}

// sameExpr compares two expressions; a set lookup's set ID, which the
// kernel does not echo back, is left out.
func sameExpr(a, b expr.Any) bool {
	la, ok := a.(*expr.Lookup)
	lb, ok2 := b.(*expr.Lookup)
	if ok && ok2 {
		x, y := *la, *lb
		x.SetID, y.SetID = 0, 0
		return x == y
	}
	return reflect.DeepEqual(a, b)
}

// queueEdit adds the edit's rule messages to c's pending batch.
func queueEdit(c *nftables.Conn, t *nftables.Table, chain *nftables.Chain, e ruleEdit) error {
	for _, h := range e.del {
		if err := c.DelRule(&nftables.Rule{Table: t, Chain: chain, Handle: h}); err != nil {
			return fmt.Errorf("delete rule %d of chain %s/%s: %w", h, t.Name, chain.Name, err)
		}
	}
	for _, exprs := range e.insert {
		if e.before != 0 {
			// Without NLM_F_APPEND the kernel puts the rule before the
			// one at Position: inserted in order, they keep their order.
			c.InsertRule(&nftables.Rule{Table: t, Chain: chain, Position: e.before, Exprs: exprs})
			continue
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: chain, Exprs: exprs})
	}
	return nil
}

// readHeld reads a chain's rules with their handles.
func readHeld(c *nftables.Conn, t *nftables.Table, chain string) ([]heldRule, error) {
	rules, err := c.GetRules(t, &nftables.Chain{Name: chain, Table: t})
	if err != nil {
		return nil, fmt.Errorf("list rules of chain %s/%s: %w", t.Name, chain, err)
	}
	out := make([]heldRule, len(rules))
	for i, r := range rules {
		out[i] = heldRule{handle: r.Handle, exprs: r.Exprs}
	}
	return out, nil
}
