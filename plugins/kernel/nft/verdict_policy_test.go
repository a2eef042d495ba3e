package nft

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/nftables"

	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
)

// The ClusterNetworkPolicy tiers at a switch port: the Admin verdicts come
// first, in order (a Pass hands on to the namespaced allows), the
// namespaced allows and default deny next, the Baseline verdicts only when
// no namespaced policy isolates the port; an edit that drops the Admin
// tier removes its chain and sets.
func TestHostPolicyVerdicts(t *testing.T) {
	b := newSwitchBed(t, "a", "b", "c")
	a, c := b.pods["a"], b.pods["c"]
	b.guard(t, false, "a", "b", "c")
	for _, n := range []string{"a", "b", "c"} {
		for _, port := range []int{80, 81, 82} {
			listen(t, b.pods[n].ns, b.pods[n].ip.String(), port)
		}
	}
	tcp := func(p int) []netpol.PortRange { return []netpol.PortRange{{Proto: 6, From: uint16(p), To: uint16(p)}} }
	fromA := netpol.Allow{V4: hostRanges(a.ip), V6: []qos.Range{}}
	fromC := netpol.Allow{V4: hostRanges(c.ip), V6: []qos.Range{}}
	admin := []netpol.Verdict{
		{Action: netpol.Pass, Match: netpol.Allow{V4: fromA.V4, V6: fromA.V6, Ports: tcp(81)}}, // a:81 to the namespaced allows (none)
		{Action: netpol.Deny, Match: fromA},                                                    // a: denied but on 81
		{Action: netpol.Accept, Match: netpol.Allow{V4: fromC.V4, V6: fromC.V6, Ports: tcp(82)}},
	}
	isolated := netpol.Direction{Isolated: true, Admin: admin, Allow: []netpol.Allow{{Ports: tcp(80)}},
		Baseline: []netpol.Verdict{{Action: netpol.Accept}}} // never reached: isolated
	baseline := netpol.Direction{Baseline: []netpol.Verdict{{Action: netpol.Deny, Match: netpol.Allow{Ports: tcp(81)}}, {Action: netpol.Deny, Match: fromC}}}
	for _, step := range []struct {
		what string
		dir  netpol.Direction
		open map[string]bool // "from:port"
	}{
		{"admin then isolated", isolated, map[string]bool{"a:80": false, "a:81": false, "a:82": false, "c:80": true, "c:81": false, "c:82": true}},
		{"baseline only", baseline, map[string]bool{"a:80": true, "a:81": false, "a:82": true, "c:80": false, "c:81": false, "c:82": false}},
		{"admin only", netpol.Direction{Admin: admin[1:2]}, map[string]bool{"a:80": false, "a:81": false, "c:80": true, "c:81": true}},
	} {
		b.policy(t, map[string]*netpol.Plan{"b": {Ingress: step.dir}})
		for k, want := range step.open {
			from, port, _ := strings.Cut(k, ":")
			var p int
			fmt.Sscan(port, &p)
			if got := b.tcp(t, from, "b", p); got != want {
				t.Errorf("%s: %s -> b TCP/%d open %v, want %v", step.what, from, p, got, want)
			}
		}
		if !b.tcp(t, "b", "a", 80) {
			t.Errorf("%s: b's egress, which no plan filters, is closed", step.what)
		}
	}
	b.policy(t, map[string]*netpol.Plan{"b": {Ingress: baseline}})
	b.nft(t, noAdminChain)
}

// noAdminChain fails when a port's Admin chain is left in the host tables.
func noAdminChain(conn *nftables.Conn) error {
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyINet, nftables.TableFamilyBridge} {
		chains, err := conn.ListChainsOfTableFamily(fam)
		if err != nil {
			return err
		}
		for _, ch := range chains {
			if ch.Table.Name == HostPolicyTable && strings.HasSuffix(ch.Name, "/admin") {
				return fmt.Errorf("chain %s is left once the plan has no Admin verdict", ch.Name)
			}
		}
	}
	return nil
}

// In a pod's table the tiers are the same: a Baseline Deny closes what no
// namespaced policy isolates, an Admin Deny precedes the allows.
func TestPolicyVerdictsInPod(t *testing.T) {
	b := newPolicyBed(t)
	c := conn(t, b.server)
	for _, port := range []int{80, 81} {
		listen(t, b.server, "10.9.0.1", port)
	}
	tcp81 := []netpol.PortRange{{Proto: 6, From: 81, To: 81}}
	for _, step := range []struct {
		what     string
		dir      netpol.Direction
		open80   bool
		open81   bool
		wantRule string
	}{
		{"baseline deny 81", netpol.Direction{Baseline: []netpol.Verdict{{Action: netpol.Deny, Match: netpol.Allow{Ports: tcp81}}}}, true, false, "tcp dport 81 drop"},
		{"admin deny 81 over an allow of all", netpol.Direction{Isolated: true, Allow: []netpol.Allow{{}},
			Admin: []netpol.Verdict{{Action: netpol.Deny, Match: netpol.Allow{V4: hostRange("10.9.0.2"), V6: []qos.Range{}, Ports: tcp81}}}}, true, false, "jump ingress/admin"},
		{"admin pass to a deny", netpol.Direction{Isolated: true, Admin: []netpol.Verdict{{Action: netpol.Pass, Match: netpol.Allow{Ports: tcp81}}, {Action: netpol.Accept}}}, true, false, "return"},
	} {
		plan := &netpol.Plan{Ingress: step.dir}
		if _, err := SyncPolicy(c, "net1", plan); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if err := CheckPolicy(c, "net1", plan); err != nil {
			t.Errorf("%s: %v", step.what, err)
		}
		if got := connects(t, b.c1, "10.9.0.1", 80); got != step.open80 {
			t.Errorf("%s: TCP/80 open %v, want %v", step.what, got, step.open80)
		}
		if got := connects(t, b.c1, "10.9.0.1", 81); got != step.open81 {
			t.Errorf("%s: TCP/81 open %v, want %v", step.what, got, step.open81)
		}
		if got := nftList(t, b.server, "table", "inet", PolicyTable("net1")); !strings.Contains(got, step.wantRule) {
			t.Errorf("%s: nft list lacks %q:\n%s", step.what, step.wantRule, got)
		}
	}
}

// A port whose plan needs only the inet table (Admin egress verdicts, no
// isolation) checks out on a node where no port made the bridge table.
func TestCheckWithoutTheBridgeTable(t *testing.T) {
	b := newSwitchBed(t, "a", "b")
	a := b.pods["a"]
	b.guard(t, false, "a", "b")
	listen(t, a.ns, a.ip.String(), 80)
	deny := []netpol.Verdict{{Action: netpol.Deny, Match: netpol.Allow{V4: hostRanges(a.ip), V6: []qos.Range{}}}}
	b.policy(t, map[string]*netpol.Plan{"b": {Egress: netpol.Direction{Admin: deny}}}) // syncs, then checks
	if b.tcp(t, "b", "a", 80) {
		t.Error("b reaches a past an Admin egress Deny")
	}
	b.policy(t, map[string]*netpol.Plan{"b": {}})
	if !b.tcp(t, "b", "a", 80) {
		t.Error("b does not reach a once the Deny went")
	}
}
