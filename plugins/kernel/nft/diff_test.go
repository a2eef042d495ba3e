package nft

import (
	"slices"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/netclass-dev/netclass/conf/qos"
)

// ownedOf is what the kernel would hold after installing rs.
func ownedOf(rs *ruleset) owned {
	o := owned{chains: map[string][][]expr.Any{}, sets: map[string][]nftables.SetElement{}}
	for _, ch := range rs.chains {
		o.chains[ch.Name] = rs.rules[ch.Name]
		if o.chains[ch.Name] == nil {
			o.chains[ch.Name] = [][]expr.Any{}
		}
	}
	for _, s := range rs.sets {
		o.sets[s.set.Name] = s.elements
	}
	return o
}

// spec is a NetworkQoS-like spec: an attachment DSCP and rules whose
// destinations are peer addresses.
func spec(mutate func(*qos.Spec)) *qos.Plan {
	s := &qos.Spec{
		DSCP: intp(10),
		Egress: []qos.Rule{
			{Priority: 1, DSCP: intp(46), Classifier: qos.Classifier{
				To:    []qos.Peer{{IPBlock: &qos.IPBlock{CIDR: "10.1.0.5/32"}}, {IPBlock: &qos.IPBlock{CIDR: "10.1.0.9/32"}}},
				Ports: []qos.Port{{Protocol: "UDP", Port: intp(5000)}},
			}},
			{Priority: 2, DSCP: intp(20), Bandwidth: &qos.Bandwidth{Rate: 1000}},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return qos.Compile(s)
}

func names(chains []*nftables.Chain) []string {
	out := []string{}
	for _, c := range chains {
		out = append(out, c.Name)
	}
	return out
}

func TestDiff(t *testing.T) {
	render := func(p *qos.Plan) *ruleset { return portRuleset("nc1", p) }
	tests := []struct {
		name string
		from *qos.Plan // nil: nothing installed
		to   *qos.Plan
		// what the transaction holds
		addChains, rewrite, delChains, addSets, delSets []string
		added, removed                                  int // set elements
	}{
		{name: "unchanged", from: spec(nil), to: spec(nil)},
		{
			name: "nothing yet", to: spec(nil),
			// rule chains in evaluation order: highest priority first
			addChains: []string{"port/nc1", "port/nc1/r1", "port/nc1/r0"}, addSets: []string{"port/nc1/r0_v4"},
		},
		{
			name: "a rule's DSCP", from: spec(nil), to: spec(func(s *qos.Spec) { s.Egress[0].DSCP = intp(34) }),
			rewrite: []string{"port/nc1/r0"},
		},
		{
			name: "a meter's rate", from: spec(nil), to: spec(func(s *qos.Spec) { s.Egress[1].Bandwidth.Rate = 2000 }),
			rewrite: []string{"port/nc1/r1"},
		},
		{
			name: "a rule's ports", from: spec(nil), to: spec(func(s *qos.Spec) { s.Egress[0].Classifier.Ports[0].Port = intp(6000) }),
			rewrite: []string{"port/nc1"},
		},
		{
			name: "the attachment's DSCP", from: spec(nil), to: spec(func(s *qos.Spec) { s.DSCP = intp(12) }),
			rewrite: []string{"port/nc1"}, // the rules' chains set their own DSCP
		},
		{
			name: "the attachment's DSCP, inherited by a rule", from: spec(func(s *qos.Spec) { s.Egress[1].DSCP = nil }),
			to:      spec(func(s *qos.Spec) { s.Egress[1].DSCP = nil; s.DSCP = intp(12) }),
			rewrite: []string{"port/nc1", "port/nc1/r1"},
		},
		{
			name: "a peer appears", from: spec(nil),
			to: spec(func(s *qos.Spec) {
				s.Egress[0].Classifier.To = append(s.Egress[0].Classifier.To, qos.Peer{IPBlock: &qos.IPBlock{CIDR: "10.1.0.7/32"}})
			}),
			added: 2, // 10.1.0.7 and the end one past it
		},
		{
			name: "a peer goes", from: spec(nil),
			to:      spec(func(s *qos.Spec) { s.Egress[0].Classifier.To = s.Egress[0].Classifier.To[:1] }),
			removed: 2,
		},
		{
			name: "an adjacent peer widens a range", from: spec(nil),
			to: spec(func(s *qos.Spec) {
				s.Egress[0].Classifier.To = append(s.Egress[0].Classifier.To, qos.Peer{IPBlock: &qos.IPBlock{CIDR: "10.1.0.6/32"}})
			}),
			added: 1, removed: 1, // the range of .5 ends one later: only its end element moves
		},
		{
			name: "a rule goes", from: spec(nil), to: spec(func(s *qos.Spec) { s.Egress = s.Egress[1:] }),
			// rule 1 becomes rule 0 (chains are named by position) and r1 goes
			rewrite: []string{"port/nc1", "port/nc1/r0"}, delChains: []string{"port/nc1/r1"}, delSets: []string{"port/nc1/r0_v4"},
		},
		{
			name: "a rule is added", from: spec(nil),
			to:        spec(func(s *qos.Spec) { s.Egress = append(s.Egress, qos.Rule{Priority: 3, DSCP: intp(8)}) }),
			addChains: []string{"port/nc1/r2"}, rewrite: []string{"port/nc1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := owned{chains: map[string][][]expr.Any{}, sets: map[string][]nftables.SetElement{}}
			if tc.from != nil {
				got = ownedOf(render(tc.from))
			}
			ch := diff(got, render(tc.to))
			var addSets []string
			for _, s := range ch.addSets {
				addSets = append(addSets, s.set.Name)
			}
			var added, removed int
			for _, e := range ch.elements {
				added, removed = added+len(e.add), removed+len(e.del)
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{
				{"chains added", names(ch.addChains), tc.addChains},
				{"chains rewritten", names(ch.rewrite), tc.rewrite},
				{"chains deleted", ch.delChains, tc.delChains},
				{"sets added", addSets, tc.addSets},
				{"sets deleted", ch.delSets, tc.delSets},
			} {
				if !slices.Equal(nonNil(c.got), nonNil(c.want)) {
					t.Errorf("%s: %q, want %q", c.what, c.got, c.want)
				}
			}
			if added != tc.added || removed != tc.removed {
				t.Errorf("elements added %d, removed %d; want %d, %d", added, removed, tc.added, tc.removed)
			}
			wantEmpty := tc.addChains == nil && tc.rewrite == nil && tc.delChains == nil && tc.addSets == nil &&
				tc.delSets == nil && tc.added == 0 && tc.removed == 0
			if ch.empty() != wantEmpty {
				t.Errorf("empty() = %v for %s", ch.empty(), ch)
			}
		})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Applying the diff's result to the rendered starting state yields the
// rendered target: the diff is complete, whatever the edit.
func TestDiffIsComplete(t *testing.T) {
	plans := []*qos.Plan{
		spec(nil),
		spec(func(s *qos.Spec) { s.Egress = nil }),
		spec(func(s *qos.Spec) { s.DSCP = nil; s.Egress = s.Egress[:1] }),
		spec(func(s *qos.Spec) {
			s.Egress[0].Classifier.To = []qos.Peer{{IPBlock: &qos.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}}
		}),
		qos.Compile(&qos.Spec{DSCP: intp(1)}),
	}
	for i, from := range plans {
		for j, to := range plans {
			got := ownedOf(portRuleset("nc1", from))
			want := portRuleset("nc1", to)
			applyInMemory(&got, want, diff(got, want))
			if w := ownedOf(want); !sameOwned(got, w) {
				t.Errorf("plan %d -> %d: diff leaves %+v, want %+v", i, j, got, w)
			}
			if i == j && !diff(ownedOf(portRuleset("nc1", from)), want).empty() {
				t.Errorf("plan %d: no change yields a non-empty diff", i)
			}
		}
	}
}

// applyInMemory does to o what the kernel does with the changes.
func applyInMemory(o *owned, want *ruleset, ch *changes) {
	for _, c := range append(slices.Clone(ch.addChains), ch.rewrite...) {
		o.chains[c.Name] = want.rules[c.Name]
	}
	for _, s := range ch.addSets {
		o.sets[s.set.Name] = s.elements
	}
	for _, e := range ch.elements {
		var kept []nftables.SetElement
		for _, el := range o.sets[e.set.Name] {
			if !slices.ContainsFunc(e.del, func(d nftables.SetElement) bool { return sameKeys([]nftables.SetElement{d}, []nftables.SetElement{el}) }) {
				kept = append(kept, el)
			}
		}
		o.sets[e.set.Name] = append(kept, e.add...)
	}
	for _, n := range ch.delChains {
		delete(o.chains, n)
	}
	for _, n := range ch.delSets {
		delete(o.sets, n)
	}
}

func sameOwned(a, b owned) bool {
	if !slices.Equal(sortedKeys(a.chains), sortedKeys(b.chains)) || !slices.Equal(sortedKeys(a.sets), sortedKeys(b.sets)) {
		return false
	}
	for n := range a.chains {
		if !equalRules(a.chains[n], b.chains[n]) {
			return false
		}
	}
	for n := range a.sets {
		if !sameKeys(a.sets[n], b.sets[n]) {
			return false
		}
	}
	return true
}
