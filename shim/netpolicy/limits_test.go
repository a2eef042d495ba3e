package netpolicy

import (
	"fmt"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/peers"
)

// countingPeers counts the resolutions it serves.
type countingPeers struct {
	inner peersByLabel
	calls int
}

func (c *countingPeers) Endpoints(ns string, to ncv1.Destination, n network.Network) ([]peers.Endpoint, error) {
	c.calls++
	return c.inner.Endpoints(ns, to, n)
}

func ports(n int) []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, n)
	for i := range out {
		out[i] = tcp(intstr.FromInt32(int32(1000+i)), nil)
	}
	return out
}

func block(cidr string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}
}

// A rule over a bound is left out, named in the error, and the pod stays
// isolated (what it would allow stays closed); the rules within bounds
// are enforced.
func TestBounds(t *testing.T) {
	var bigBlocks []networkingv1.NetworkPolicyPeer
	for range MaxPeersPerRule + 1 {
		bigBlocks = append(bigBlocks, block("10.0.0.0/8"))
	}
	excepts := make([]string, MaxExceptsPerBlock+1)
	for i := range excepts {
		excepts[i] = "10.0.0.0/24"
	}
	var manyRules, manyPorts []networkingv1.NetworkPolicyIngressRule
	for i := range MaxRulesPerAttachment {
		manyRules = append(manyRules, networkingv1.NetworkPolicyIngressRule{Ports: ports(1 + i%2)}) // a rule per family
	}
	for range 2 * MaxRangesPerAttachment / MaxPortsPerRule {
		manyPorts = append(manyPorts, networkingv1.NetworkPolicyIngressRule{Ports: ports(MaxPortsPerRule)})
	}
	for _, tc := range []struct {
		name     string
		ingress  []networkingv1.NetworkPolicyIngressRule
		allows   int
		errPaths []string
		errText  string
	}{
		{"ports", []networkingv1.NetworkPolicyIngressRule{{Ports: ports(MaxPortsPerRule + 1)}, {Ports: ports(1)}}, 1, []string{"ingress[0]"}, "ports"},
		{"peers", []networkingv1.NetworkPolicyIngressRule{{From: bigBlocks}}, 0, []string{"ingress[0]"}, "peers"},
		{"excepts", []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: excepts}}}}}, 0, []string{"ingress[0]"}, "excepts"},
		{"rules per attachment", manyRules, MaxRulesPerAttachment / 2,
			[]string{fmt.Sprintf("ingress[%d]", MaxRulesPerAttachment/2), fmt.Sprintf("ingress[%d]", MaxRulesPerAttachment-1)}, "nftables rules"},
		{"ranges per attachment", manyPorts, MaxRangesPerAttachment / MaxPortsPerRule,
			[]string{fmt.Sprintf("ingress[%d]", MaxRangesPerAttachment/MaxPortsPerRule), fmt.Sprintf("ingress[%d]", len(manyPorts)-1)}, "port ranges"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy("big", func(p *networkingv1.NetworkPolicy) { p.Spec.Ingress = tc.ingress })
			plan, _, err := Compile([]*networkingv1.NetworkPolicy{p}, Target{Namespace: "t1", Labels: map[string]string{"app": "server"}, Network: blue}, peersByLabel{})
			if !plan.Ingress.Isolated || len(plan.Ingress.Allow) != tc.allows {
				t.Errorf("isolated %v with %d allows, want isolated with %d", plan.Ingress.Isolated, len(plan.Ingress.Allow), tc.allows)
			}
			var paths []string
			for _, re := range RuleErrors(err) {
				paths = append(paths, re.Path)
				if !strings.Contains(re.Error(), tc.errText) {
					t.Errorf("error %q does not say %q", re, tc.errText)
				}
			}
			if len(paths) == 0 || paths[0] != tc.errPaths[0] || paths[len(paths)-1] != tc.errPaths[len(tc.errPaths)-1] {
				t.Errorf("rules left out %v, want from %s to %s", paths, tc.errPaths[0], tc.errPaths[len(tc.errPaths)-1])
			}
		})
	}
}

// A selector repeated in a rule, in several rules, policies and
// attachments is resolved once per sync.
func TestRepeatedSelectorsResolveOnce(t *testing.T) {
	everyone := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}
	repeated := make([]networkingv1.NetworkPolicyPeer, MaxPeersPerRule)
	for i := range repeated {
		repeated[i] = everyone
	}
	p := policy("dup", func(p *networkingv1.NetworkPolicy) {
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: repeated}, {From: []networkingv1.NetworkPolicyPeer{everyone}}}
	})
	q := policy("dup2", func(q *networkingv1.NetworkPolicy) { q.Spec.Ingress = p.Spec.Ingress })
	res := &countingPeers{inner: peersByLabel{"client": "10.0.0.2", "other": "10.0.0.3"}}
	m := Memo(res)
	for _, pod := range []string{"server-1", "server-2"} {
		plan, _, err := Compile([]*networkingv1.NetworkPolicy{p, q}, Target{Namespace: "t1", Labels: map[string]string{"app": "server", "pod": pod}, Network: blue}, m)
		if err != nil || len(plan.Ingress.Allow) != 4 || len(plan.Ingress.Allow[0].V4) != 1 {
			t.Fatalf("%s: plan %+v, %v", pod, plan.Ingress, err)
		}
	}
	if res.calls != 1 {
		t.Errorf("the selector was resolved %d times, want once", res.calls)
	}
}
