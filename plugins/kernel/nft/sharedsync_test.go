package nft

import (
	"errors"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"

	"github.com/netclass-dev/netclass/conf/netpol"
)

// A transaction holds as many ports' changes as its bounds allow, counted
// by what each change sends, not by what its port holds.
func TestChunkBySent(t *testing.T) {
	els := func(n int) []nftables.SetElement { return make([]nftables.SetElement, n) }
	chain := &nftables.Chain{Name: "c"}
	rules := func(n int) *portObjects {
		return &portObjects{rs: &ruleset{rules: map[string][][]expr.Any{"c": make([][]expr.Any, n)}}}
	}
	many := func(n int, pc portChange) []portChange {
		out := make([]portChange, n)
		for i := range out {
			out[i] = pc
		}
		return out
	}
	big := rules(60)
	big.rs.sets = []setWithElements{{elements: els(1600)}} // what it holds, not sent
	tests := []struct {
		name    string
		pending []portChange
		want    int
	}{
		{"one element edit of 100 big ports", many(100, portChange{want: big, ch: &changes{elements: []elementChange{{add: els(2), del: els(2)}}}}), 100},
		{"100 ports added, 1600 elements each", many(100, portChange{want: big, ch: &changes{addSets: []setWithElements{{elements: els(1600)}}}}), 12},
		{"100 ports added, 100 rules each", many(100, portChange{want: rules(100), ch: &changes{addChains: []*nftables.Chain{chain}}}), 20},
		{"a rewrite counts the rules it deletes and inserts", many(100, portChange{want: rules(50), ch: &changes{rewrite: []*nftables.Chain{chain}, edits: map[string]ruleEdit{"c": {del: make([]uint64, 50), insert: make([][]expr.Any, 50)}}}}), 20},
		{"one port over every bound", many(3, portChange{want: big, ch: &changes{addSets: []setWithElements{{elements: els(30000)}}}}), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tx transaction
			for _, pc := range tc.pending {
				if !tx.fits(pc) {
					break
				}
				tx.add(pc)
			}
			if got := len(tx.changes); got != tc.want {
				t.Errorf("the first transaction holds %d changes, want %d", got, tc.want)
			}
		})
	}
}

// A sync of a port that holds no policy and is to hold none (a new port
// no policy selects) sends nothing: the node's tables are not read.
// Without what the port holds, they are.
func TestHostPolicyNoneToNoneReadsNothing(t *testing.T) {
	sent := 0
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		sent += len(req)
		return nil, errors.New("no kernel here")
	}))
	if err != nil {
		t.Fatal(err)
	}
	none := &netpol.Plan{}
	if r := SyncHostPolicies(c, map[string]HostPort{"x": {Bridge: "br0", Plan: none, Prev: none}})["x"]; r.Err != nil || r.Changed || sent != 0 {
		t.Fatalf("none to none: changed %v, %v, %d messages sent, want none", r.Changed, r.Err, sent)
	}
	if r := SyncHostPolicies(c, map[string]HostPort{"x": {Bridge: "br0", Plan: none}})["x"]; r.Err == nil || sent == 0 {
		t.Fatalf("to none from what the kernel holds: %v, %d messages sent, want the tables read", r.Err, sent)
	}
}
