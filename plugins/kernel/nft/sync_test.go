package nft

import (
	"fmt"
	"maps"
	"slices"
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

// differing counts the positions where two chains' handles differ (-1:
// not as many rules).
func differing(a, b []uint64) int {
	if len(a) != len(b) {
		return -1
	}
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
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
			if again := step("same plan", spec(nil), false); !maps.EqualFunc(first, again, slices.Equal[[]uint64]) {
				t.Errorf("a sync with nothing to do touched rules: %v -> %v", first, again)
			}
			peer := step("a peer appears", withPeer, true)
			if !maps.EqualFunc(first, peer, slices.Equal[[]uint64]) {
				t.Errorf("a new peer address rewrote rules instead of adding set elements: %v -> %v", first, peer)
			}
			// The meter's rule alone is sent again (a new handle, in its
			// place); every other rule, of its chain or another, stays.
			rate := step("a meter's rate", newRate, true)
			for chain, hs := range peer {
				if d := differing(hs, rate[chain]); chain == target.rule("r1") && d != 1 || chain != target.rule("r1") && d != 0 {
					t.Errorf("chain %s: %d rules sent again by a meter's edit: %v -> %v", chain, d, hs, rate[chain])
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

// Many ports synced at once end up each holding its own plan: one added,
// one edited, one removed, one unchanged (its rules keep their handles).
func TestSyncPortsAtOnce(t *testing.T) {
	n := nstest.New(t)
	c := conn(t, n)
	for _, h := range []string{"nc1", "nc2", "nc3"} {
		if _, err := SyncPortQoS(c, h, spec(nil)); err != nil {
			t.Fatal(err)
		}
	}
	before := handles(t, c, portTable())
	edited := spec(func(s *qos.Spec) { s.Egress[0].DSCP = intp(34) })
	res := SyncPorts(c, map[string]*qos.Plan{
		"nc1": spec(nil), "nc2": edited, "nc3": qos.Compile(&qos.Spec{}), "nc4": spec(nil),
	})
	for h, want := range map[string]bool{"nc1": false, "nc2": true, "nc3": true, "nc4": true} {
		if res[h].Err != nil || res[h].Changed != want {
			t.Errorf("%s: %+v, want changed %v", h, res[h], want)
		}
	}
	for h, p := range map[string]*qos.Plan{"nc1": spec(nil), "nc2": edited, "nc4": spec(nil)} {
		if err := CheckPortQoS(c, h, p); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if has, err := HasPortQoS(c, "nc3"); err != nil || has {
		t.Errorf("nc3's rules are still there: %v, %v", has, err)
	}
	after := handles(t, c, portTable())
	for _, chain := range []string{"port/nc1", "port/nc1/r0", "port/nc1/r1"} {
		if !slices.Equal(before[chain], after[chain]) {
			t.Errorf("unchanged port's chain %s was rewritten", chain)
		}
	}
}

// A hundred ports with a hundred peer addresses each, edited at once: more
// than one transaction's worth, all reported changed and all holding the
// edit (a single transaction overflowed the socket: EMSGSIZE, and ENOBUFS
// on the acknowledgements of a committed one).
func TestSyncManyPorts(t *testing.T) {
	n := nstest.New(t)
	c := conn(t, n)
	plan := func(dscp int) *qos.Plan {
		return spec(func(s *qos.Spec) {
			s.Egress[0].DSCP = intp(dscp)
			s.Egress[0].Classifier.To = nil
			for i := 1; i <= 100; i++ {
				s.Egress[0].Classifier.To = append(s.Egress[0].Classifier.To, qos.Peer{IPBlock: &qos.IPBlock{CIDR: fmt.Sprintf("10.77.0.%d/32", i)}})
			}
		})
	}
	plans := func(dscp int) map[string]*qos.Plan {
		m := map[string]*qos.Plan{}
		for i := range 100 {
			m[fmt.Sprintf("nc%03d", i)] = plan(dscp)
		}
		return m
	}
	for _, dscp := range []int{18, 20} {
		for h, r := range SyncPorts(c, plans(dscp)) {
			if r.Err != nil || !r.Changed {
				t.Fatalf("DSCP %d: port %s: %+v", dscp, h, r)
			}
		}
		for _, h := range []string{"nc000", "nc050", "nc099"} {
			if err := CheckPortQoS(c, h, plan(dscp)); err != nil {
				t.Errorf("DSCP %d: %s: %v", dscp, h, err)
			}
		}
	}
}
