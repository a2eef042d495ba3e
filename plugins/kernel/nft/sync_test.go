package nft

import (
	"maps"
	"testing"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/test/nstest"
)

// handles returns the handle of every rule of the table, per chain: a rule
// that keeps its handle was not touched.
func handles(t *testing.T, c *nftables.Conn, table *nftables.Table) map[string][]uint64 {
	t.Helper()
	chains, err := c.ListChainsOfTableFamily(table.Family)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]uint64{}
	for _, ch := range chains {
		if ch.Table.Name != table.Name {
			continue
		}
		rules, err := c.GetRules(table, ch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rules {
			out[ch.Name] = append(out[ch.Name], r.Handle)
		}
	}
	return out
}

// syncTarget is one kind of place rules live in, seen through the
// functions the tests need.
type syncTarget struct {
	name  string
	setup func(t *testing.T) *nstest.NS
	sync  func(c *nftables.Conn, p *qos.Plan) (bool, error)
	check func(c *nftables.Conn, p *qos.Plan) error
	has   func(c *nftables.Conn) (bool, error)
	table *nftables.Table
	// chain names as the target renders them: the main chain and rule N's
	main func() string
	rule func(n string) string
}

func syncTargets() []syncTarget {
	return []syncTarget{
		{
			name: "port", setup: func(t *testing.T) *nstest.NS { return nstest.New(t) },
			sync:  func(c *nftables.Conn, p *qos.Plan) (bool, error) { return SyncPortQoS(c, "nc1", p) },
			check: func(c *nftables.Conn, p *qos.Plan) error { return CheckPortQoS(c, "nc1", p) },
			has:   func(c *nftables.Conn) (bool, error) { return HasPortQoS(c, "nc1") },
			table: portTable(),
			main:  func() string { return "port/nc1" },
			rule:  func(n string) string { return "port/nc1/" + n },
		},
		{
			name: "pod", setup: podNS,
			sync:  func(c *nftables.Conn, p *qos.Plan) (bool, error) { return SyncPodQoS(c, "net1", p) },
			check: func(c *nftables.Conn, p *qos.Plan) error { return CheckPodQoS(c, "net1", p) },
			has:   func(c *nftables.Conn) (bool, error) { return HasAnyPodQoS(c, "net1") },
			table: podTable("net1"),
			main:  func() string { return podChain },
			rule:  func(n string) string { return n },
		},
	}
}

// A sequence of edits, each synced in place: the kernel ends up holding
// exactly the plan (CHECK passes), a sync with nothing to do sends nothing,
// and the rules an edit does not concern keep their handles.
func TestSyncInPlace(t *testing.T) {
	withPeer := spec(func(s *qos.Spec) {
		s.Egress[0].Classifier.To = append(s.Egress[0].Classifier.To, qos.Peer{IPBlock: &qos.IPBlock{CIDR: "10.1.0.7/32"}})
	})
	newRate := spec(func(s *qos.Spec) { s.Egress[1].Bandwidth.Rate = 2000 })
	for _, target := range syncTargets() {
		t.Run(target.name, func(t *testing.T) {
			n := target.setup(t)
			c := conn(t, n)
			step := func(what string, p *qos.Plan, wantChanged bool) map[string][]uint64 {
				t.Helper()
				changed, err := target.sync(c, p)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if changed != wantChanged {
					t.Errorf("%s: changed = %v, want %v", what, changed, wantChanged)
				}
				if !p.NeedsRules() {
					return nil
				}
				if err := target.check(c, p); err != nil {
					t.Errorf("%s: the kernel does not hold the plan: %v", what, err)
				}
				return handles(t, c, target.table)
			}
			first := step("first sync", spec(nil), true)
			if again := step("same plan", spec(nil), false); !maps.EqualFunc(first, again, equalHandles) {
				t.Errorf("a sync with nothing to do touched rules: %v -> %v", first, again)
			}
			peer := step("a peer appears", withPeer, true)
			if !maps.EqualFunc(first, peer, equalHandles) {
				t.Errorf("a new peer address rewrote rules instead of adding set elements: %v -> %v", first, peer)
			}
			rate := step("a meter's rate", newRate, true)
			for chain, hs := range peer {
				if chain == target.rule("r1") {
					if equalHandles(hs, rate[chain]) {
						t.Errorf("chain %s of the edited meter kept its rules", chain)
					}
				} else if !equalHandles(hs, rate[chain]) {
					t.Errorf("chain %s changed although its rules did not: %v -> %v", chain, hs, rate[chain])
				}
			}
			step("a rule goes", spec(func(s *qos.Spec) { s.Egress = s.Egress[:1] }), true)
			left := handles(t, c, target.table)
			if _, ok := left[target.rule("r1")]; ok {
				t.Errorf("the chain of the removed rule is still there: %v", left)
			}
			step("no rules", qos.Compile(&qos.Spec{}), true)
			if has, err := target.has(c); err != nil || has {
				t.Errorf("rules left after a sync to a plan without rules: %v, %v", has, err)
			}
			step("nothing to remove", qos.Compile(&qos.Spec{}), false)
		})
	}
}

func equalHandles(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A port whose map entry or shared base was lost is repaired by the sync
// that finds it, its own chains untouched.
func TestSyncPortRepairsMapAndBase(t *testing.T) {
	n := nstest.New(t)
	c := conn(t, n)
	if _, err := SyncPortQoS(c, "nc1", spec(nil)); err != nil {
		t.Fatal(err)
	}
	for _, tamper := range [][]string{
		{"delete", "element", "bridge", PortQoSTable, "ports", `{ "nc1" }`},
		{"flush", "chain", "bridge", PortQoSTable, "prerouting"},
	} {
		if out, err := execIn(n, "nft", tamper...); err != nil {
			t.Fatalf("tamper %v: %v\n%s", tamper, err, out)
		}
		changed, err := SyncPortQoS(c, "nc1", spec(nil))
		if err != nil || !changed {
			t.Fatalf("sync after %v: changed %v, %v", tamper, changed, err)
		}
		if err := CheckPortQoS(c, "nc1", spec(nil)); err != nil {
			t.Errorf("after %v and a sync: %v", tamper, err)
		}
	}
}
