package render

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/network"
)

// countingPeers gives every selector the same n addresses and counts the
// resolutions.
type countingPeers struct {
	addrs []netip.Addr
	calls int
}

func (c *countingPeers) Addresses(string, ncv1.Destination, network.Network) ([]netip.Addr, error) {
	c.calls++
	return c.addrs, nil
}

func addrs(n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
	}
	return out
}

// dscpsOf lists the rules' DSCPs.
func dscpsOf(rules []qos.Rule) string {
	var dscps []int
	for _, r := range rules {
		dscps = append(dscps, *r.DSCP)
	}
	return fmt.Sprint(dscps)
}

// everyPod is a rule to every pod of every namespace, written k times.
func everyPod(dscp int32, k int) ncv1.Rule {
	r := ncv1.Rule{DSCP: dscp, Classifier: &ncv1.Classifier{}}
	for range k {
		r.Classifier.To = append(r.Classifier.To, ncv1.Destination{NamespaceSelector: &metav1.LabelSelector{}})
	}
	return r
}

// A tenant's NetworkQoS naming one selector many times, in many rules,
// costs one resolution and each rule its addresses once.
func TestRulesResolveEachDestinationOnce(t *testing.T) {
	peers := &countingPeers{addrs: addrs(150)}
	obj := nqos("wide", 1, func(o *ncv1.NetworkQoS) {
		o.Spec.Egress = nil
		for i := range 20 {
			o.Spec.Egress = append(o.Spec.Egress, everyPod(int32(i), 32))
		}
	})
	rules, _, err := Rules([]*ncv1.NetworkQoS{obj}, Target{Namespace: "games", Network: network.Default()}, peers)
	if err != nil {
		t.Fatal(err)
	}
	if peers.calls != 1 {
		t.Errorf("%d resolutions of one selector, want 1", peers.calls)
	}
	if len(rules) != 20 {
		t.Fatalf("%d rules, want 20", len(rules))
	}
	for _, r := range rules {
		if len(r.Classifier.To) != 150 {
			t.Fatalf("rule %d classifies %d destinations, want the 150 addresses once", r.Priority, len(r.Classifier.To))
		}
	}
}

// The rules of one attachment classify at most MaxSelectedAddresses
// addresses, given in the order the rules take precedence (as conf/qos's
// plan orders them): a rule over what is left is dropped, named, never one
// that wins over a rule kept, and the others stay.
func TestRulesBoundTheSelectedAddresses(t *testing.T) {
	ipBlockRule := ncv1.Rule{DSCP: 16, Classifier: &ncv1.Classifier{To: []ncv1.Destination{{IPBlock: &ncv1.IPBlock{CIDR: "192.0.2.0/24"}}}}}
	one := func(name string, priority, dscp int32) *ncv1.NetworkQoS {
		return nqos(name, priority, func(o *ncv1.NetworkQoS) { o.Spec.Egress = []ncv1.Rule{everyPod(dscp, 1)} })
	}
	for name, tc := range map[string]struct {
		fit       int // rules whose addresses fit
		objs      []*ncv1.NetworkQoS
		leftOut   string
		wantDSCPs string // in the objects' name order
	}{
		"the first rules of an object": {fit: 2, objs: []*ncv1.NetworkQoS{nqos("wide", 1, func(o *ncv1.NetworkQoS) {
			o.Spec.Egress = []ncv1.Rule{everyPod(10, 1), everyPod(12, 1), everyPod(14, 1), ipBlockRule}
		})}, leftOut: "NetworkQoS games/wide spec.egress[0]", wantDSCPs: "[12 14 16]"},
		"the lowest priority, whatever its name": {fit: 2, objs: []*ncv1.NetworkQoS{one("a-low", 1, 10), one("m-high", 3, 30), one("z-mid", 2, 20)},
			leftOut: "NetworkQoS games/a-low spec.egress[0]", wantDSCPs: "[30 20]"},
		"the first name among equal priorities": {fit: 1, objs: []*ncv1.NetworkQoS{one("b", 1, 20), one("a", 1, 10)},
			leftOut: "NetworkQoS games/a spec.egress[0]", wantDSCPs: "[20]"},
	} {
		t.Run(name, func(t *testing.T) {
			peers := &countingPeers{addrs: addrs(MaxSelectedAddresses/(tc.fit+1) + 1)} // one rule more does not fit
			rules, _, err := Rules(tc.objs, Target{Namespace: "games", Network: network.Default()}, peers)
			want := fmt.Sprintf("%s: its destination selectors select more addresses than are left of the %d", tc.leftOut, MaxSelectedAddresses)
			if err == nil || !strings.Contains(err.Error(), want) || len(IgnoredRules(err)) != 1 {
				t.Fatalf("error %v, want only one, containing %q", err, want)
			}
			if got := dscpsOf(rules); got != tc.wantDSCPs {
				t.Fatalf("rules of DSCP %s kept, want %s", got, tc.wantDSCPs)
			}
		})
	}
}

// Distinct selectors are resolved up to MaxSelectors for one attachment:
// the rules past it are dropped, named, unresolved.
func TestRulesBoundTheSelectorsResolved(t *testing.T) {
	peers := &countingPeers{addrs: addrs(1)}
	var objs []*ncv1.NetworkQoS
	for o := range MaxSelectors/ncv1.MaxNetworkQoSRules + 1 {
		objs = append(objs, nqos(fmt.Sprintf("q%03d", o), 1, func(q *ncv1.NetworkQoS) {
			q.Spec.Egress = nil
			for i := range ncv1.MaxNetworkQoSRules {
				sel := &metav1.LabelSelector{MatchLabels: map[string]string{"rule": fmt.Sprint(o, "-", i)}}
				q.Spec.Egress = append(q.Spec.Egress, ncv1.Rule{DSCP: 10, Classifier: &ncv1.Classifier{To: []ncv1.Destination{{PodSelector: sel}}}})
			}
		}))
	}
	rules, _, err := Rules(objs, Target{Namespace: "games", Network: network.Default()}, peers)
	if peers.calls != MaxSelectors || len(rules) != MaxSelectors {
		t.Errorf("%d resolutions, %d rules; want %d of each", peers.calls, len(rules), MaxSelectors)
	}
	want := fmt.Sprintf("more than the %d distinct destination selectors netclass resolves for one attachment", MaxSelectors)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

// A NetworkQoS the schema accepts but the plugins' qos block refuses (the
// controller says Accepted=False) loses its own rule, named with its
// field, and never fails another object's rules with it, nor costs them
// its selectors' resolution and addresses.
func TestRulesLeaveOutAnInvalidRule(t *testing.T) {
	hugeBurst, rate := int64(4_000_000_000), int64(1000)
	bad := nqos("bad", 1, func(o *ncv1.NetworkQoS) {
		o.Spec.Egress = []ncv1.Rule{
			{DSCP: 10, Classifier: &ncv1.Classifier{Ports: []ncv1.Port{{}}, To: []ncv1.Destination{{NamespaceSelector: &metav1.LabelSelector{}}}}},
			{DSCP: 12, Bandwidth: &ncv1.Bandwidth{Rate: &rate, Burst: &hugeBurst}},
			{DSCP: 14},
		}
	})
	good := nqos("good", 2, func(o *ncv1.NetworkQoS) { o.Spec.Egress = []ncv1.Rule{{DSCP: 46}} })
	peers := &countingPeers{addrs: addrs(MaxSelectedAddresses)}
	rules, _, err := Rules([]*ncv1.NetworkQoS{bad, good}, Target{Namespace: "games", Network: network.Default()}, peers)
	if peers.calls != 0 {
		t.Errorf("the invalid rule's selector was resolved (%d calls): it costs the valid rules' budget", peers.calls)
	}
	for _, want := range []string{"NetworkQoS games/bad spec.egress[0]: classifier.ports[0].protocol", "NetworkQoS games/bad spec.egress[1]: bandwidth"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one naming %q", err, want)
		}
	}
	var left []string
	for _, ir := range IgnoredRules(err) {
		left = append(left, ir.Namespace+"/"+ir.Name+" "+ir.Path)
	}
	if want := []string{"games/bad spec.egress[0]", "games/bad spec.egress[1]"}; !slices.Equal(left, want) {
		t.Errorf("rules left out %v, want %v", left, want)
	}
	if got := dscpsOf(rules); got != "[14 46]" {
		t.Fatalf("rules of DSCP %s kept, want [14 46]", got)
	}
}

// A NetworkQoS at the schema's bounds whose every destination selects
// every pod of a 5,000-pod cluster, as one attachment's node compiles it.
func BenchmarkRulesEveryPodEverywhere(b *testing.B) {
	peers := &countingPeers{addrs: addrs(5000)}
	obj := nqos("wide", 1, func(o *ncv1.NetworkQoS) {
		o.Spec.Egress = nil
		for i := range ncv1.MaxNetworkQoSRules {
			o.Spec.Egress = append(o.Spec.Egress, everyPod(int32(i), 32))
		}
	})
	b.ReportAllocs()
	for b.Loop() {
		_, _, _ = Rules([]*ncv1.NetworkQoS{obj}, Target{Namespace: "games", Network: network.Default()}, peers)
	}
}
