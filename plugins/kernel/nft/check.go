package nft

import (
	"fmt"
	"slices"
	"sort"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// verify checks that the table exists and that every chain and set of want
// holds exactly the rules and elements rendered: a removed, added or edited
// rule is an error.
func verify(c *nftables.Conn, want *ruleset) error {
	ok, err := tableExists(c, want.table)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("nftables table %q is missing", want.table.Name)
	}
	for _, ch := range want.chains {
		got, err := c.GetRules(want.table, ch)
		if err != nil {
			return fmt.Errorf("list rules of chain %s/%s: %w", want.table.Name, ch.Name, err)
		}
		if err := sameRules(got, want.rules[ch.Name]); err != nil {
			return fmt.Errorf("chain %s/%s: %w", want.table.Name, ch.Name, err)
		}
	}
	for _, s := range want.sets {
		if err := sameElements(c, want.table, s); err != nil {
			return err
		}
	}
	return nil
}

func sameRules(got []*nftables.Rule, want [][]expr.Any) error {
	if len(got) != len(want) {
		return fmt.Errorf("has %d rules, want %d", len(got), len(want))
	}
	for i := range want {
		if !sameRule(got[i].Exprs, want[i]) {
			return fmt.Errorf("rule %d differs from the configuration", i)
		}
	}
	return nil
}

func sameElements(c *nftables.Conn, t *nftables.Table, want setWithElements) error {
	s, err := c.GetSetByName(t, want.set.Name)
	if err != nil {
		return fmt.Errorf("nftables set %s/%s: %w", t.Name, want.set.Name, err)
	}
	got, err := c.GetSetElements(s)
	if err != nil {
		return fmt.Errorf("list elements of set %s/%s: %w", t.Name, want.set.Name, err)
	}
	if !sameKeys(got, want.elements) {
		return fmt.Errorf("nftables set %s/%s differs from the configuration", t.Name, want.set.Name)
	}
	return nil
}

func sameKeys(a, b []nftables.SetElement) bool {
	key := func(els []nftables.SetElement) []string {
		out := make([]string, 0, len(els))
		for _, e := range els {
			out = append(out, fmt.Sprintf("%x/%v", e.Key, e.IntervalEnd))
		}
		sort.Strings(out)
		return out
	}
	return slices.Equal(key(a), key(b))
}
