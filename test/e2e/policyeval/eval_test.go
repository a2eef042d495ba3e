package policyeval

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
)

func policy(ns string, sel map[string]string, mod func(*networkingv1.NetworkPolicy)) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: sel}}}
	if mod != nil {
		mod(p)
	}
	return p
}

func from(peers ...networkingv1.NetworkPolicyPeer) func(*networkingv1.NetworkPolicy) {
	return func(p *networkingv1.NetworkPolicy) {
		p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: peers})
	}
}

func onPorts(ports ...networkingv1.NetworkPolicyPort) func(*networkingv1.NetworkPolicy) {
	return func(p *networkingv1.NetworkPolicy) {
		p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{Ports: ports})
	}
}

func sel(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

func TestAllowed(t *testing.T) {
	web := Pod{Namespace: "a", Name: "web", Labels: map[string]string{"app": "web"}, Addr: netip.MustParseAddr("10.0.0.1"),
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	ca := Pod{Namespace: "a", Name: "client", Labels: map[string]string{"app": "client"}, Addr: netip.MustParseAddr("10.0.0.2")}
	cb := Pod{Namespace: "b", Name: "client", Labels: map[string]string{"app": "client"}, Addr: netip.MustParseAddr("10.0.0.3")}
	ns := map[string]map[string]string{"a": {"team": "a"}, "b": {"team": "b"}}
	tcp := corev1.ProtocolTCP
	cases := []struct {
		name     string
		pols     []*networkingv1.NetworkPolicy
		src, dst Pod
		proto    corev1.Protocol
		port     int32
		want     bool
	}{
		{"no policy", nil, cb, web, tcp, 80, true},
		{"default deny ingress", []*networkingv1.NetworkPolicy{policy("a", nil, nil)}, ca, web, tcp, 80, false},
		{"another namespace's policy", []*networkingv1.NetworkPolicy{policy("b", nil, nil)}, ca, web, tcp, 80, true},
		{"unlabelled", []*networkingv1.NetworkPolicy{policy("a", nil, func(p *networkingv1.NetworkPolicy) { p.Labels = nil })}, ca, web, tcp, 80, true},
		{"labelled none", []*networkingv1.NetworkPolicy{policy("a", nil, func(p *networkingv1.NetworkPolicy) {
			p.Labels[contract.PolicyControllerLabel] = "none"
		})}, ca, web, tcp, 80, true},
		{"default deny egress of the client", []*networkingv1.NetworkPolicy{policy("a", map[string]string{"app": "client"}, func(p *networkingv1.NetworkPolicy) {
			p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		})}, ca, web, tcp, 80, false},
		{"egress isolation does not close ingress", []*networkingv1.NetworkPolicy{policy("a", map[string]string{"app": "client"}, func(p *networkingv1.NetworkPolicy) {
			p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		})}, web, ca, tcp, 80, true},
		{"podSelector: own namespace only", []*networkingv1.NetworkPolicy{policy("a", map[string]string{"app": "web"}, from(networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "client")}))}, cb, web, tcp, 80, false},
		{"podSelector: a match", []*networkingv1.NetworkPolicy{policy("a", map[string]string{"app": "web"}, from(networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "client")}))}, ca, web, tcp, 80, true},
		{"namespaceSelector", []*networkingv1.NetworkPolicy{policy("a", nil, from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "b")}))}, cb, web, tcp, 80, true},
		{"both selectors: namespace matches, pod not", []*networkingv1.NetworkPolicy{policy("a", nil, from(networkingv1.NetworkPolicyPeer{
			NamespaceSelector: sel("team", "b"), PodSelector: sel("app", "web")}))}, cb, web, tcp, 80, false},
		{"ipBlock except", []*networkingv1.NetworkPolicy{policy("a", nil, from(networkingv1.NetworkPolicyPeer{
			IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/24", Except: []string{"10.0.0.3/32"}}}))}, cb, web, tcp, 80, false},
		{"ipBlock", []*networkingv1.NetworkPolicy{policy("a", nil, from(networkingv1.NetworkPolicyPeer{
			IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/24", Except: []string{"10.0.0.3/32"}}}))}, ca, web, tcp, 80, true},
		{"named port", []*networkingv1.NetworkPolicy{policy("a", nil, onPorts(networkingv1.NetworkPolicyPort{Port: ptr.To(intstr.FromString("http"))}))}, ca, web, tcp, 8080, true},
		{"named port: another port", []*networkingv1.NetworkPolicy{policy("a", nil, onPorts(networkingv1.NetworkPolicyPort{Port: ptr.To(intstr.FromString("http"))}))}, ca, web, tcp, 80, false},
		{"endPort", []*networkingv1.NetworkPolicy{policy("a", nil, onPorts(networkingv1.NetworkPolicyPort{Port: ptr.To(intstr.FromInt32(9000)), EndPort: ptr.To(int32(9010))}))}, ca, web, tcp, 9005, true},
		{"protocol mismatch", []*networkingv1.NetworkPolicy{policy("a", nil, onPorts(networkingv1.NetworkPolicyPort{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53))}))}, ca, web, tcp, 53, false},
		{"scoped to another network", []*networkingv1.NetworkPolicy{policy("a", nil, func(p *networkingv1.NetworkPolicy) {
			p.Annotations = map[string]string{contract.AnnotationPolicyNetworks: "other, x/y"}
		})}, ca, web, tcp, 80, true},
		{"scoped to this network", []*networkingv1.NetworkPolicy{policy("a", nil, func(p *networkingv1.NetworkPolicy) {
			p.Annotations = map[string]string{contract.AnnotationPolicyNetworks: "other, net"}
		})}, ca, web, tcp, 80, false},
		{"egress named port: the destination's", []*networkingv1.NetworkPolicy{policy("a", map[string]string{"app": "client"}, func(p *networkingv1.NetworkPolicy) {
			p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
			p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromString("http"))}}}}
		})}, ca, web, tcp, 8080, true},
		{"egress named port: a destination without it", []*networkingv1.NetworkPolicy{policy("a", map[string]string{"app": "client"}, func(p *networkingv1.NetworkPolicy) {
			p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
			p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromString("http"))}}}}
		})}, ca, cb, tcp, 8080, false},
		{"union", []*networkingv1.NetworkPolicy{
			policy("a", nil, onPorts(networkingv1.NetworkPolicyPort{Port: ptr.To(intstr.FromInt32(80))})),
			policy("a", nil, from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "b")}))}, cb, web, tcp, 9005, true},
	}
	for _, c := range cases {
		w := World{Policies: c.pols, Namespaces: ns, Network: "net"}
		if got := w.Allowed(c.src, c.dst, c.proto, c.port); got != c.want {
			t.Errorf("%s: %s/%s -> %s/%s %s/%d allowed=%v, want %v", c.name, c.src.Namespace, c.src.Name, c.dst.Namespace, c.dst.Name, c.proto, c.port, got, c.want)
		}
	}
}

// Ingress and Egress are Allowed's two halves; Selecting names the
// policies that isolate a pod on the network, whatever their direction.
func TestDirectionsAndSelecting(t *testing.T) {
	web := Pod{Namespace: "a", Name: "web", Labels: map[string]string{"app": "web"}, Addr: netip.MustParseAddr("10.0.0.1")}
	client := Pod{Namespace: "a", Name: "client", Labels: map[string]string{"app": "client"}, Addr: netip.MustParseAddr("10.0.0.2")}
	deny := policy("a", map[string]string{"app": "web"}, nil)
	deny.Name = "deny"
	out := policy("a", map[string]string{"app": "client"}, func(p *networkingv1.NetworkPolicy) {
		p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	})
	out.Name = "out"
	scoped := policy("a", nil, func(p *networkingv1.NetworkPolicy) {
		p.Annotations = map[string]string{contract.AnnotationPolicyNetworks: "elsewhere"}
	})
	scoped.Name = "scoped"
	w := World{Policies: []*networkingv1.NetworkPolicy{out, deny, scoped}, Network: "blue"}
	tcp := corev1.ProtocolTCP
	if w.Ingress(web, client, tcp, 80) || !w.Egress(web, client, tcp, 80) {
		t.Error("web: ingress must be denied, egress open")
	}
	if !w.Ingress(client, web, tcp, 80) || w.Egress(client, web, tcp, 80) {
		t.Error("client: ingress must be open, egress denied")
	}
	if got := w.Selecting(web); len(got) != 1 || got[0] != "deny" {
		t.Errorf("Selecting(web) = %v, want [deny]", got)
	}
	if got := w.Selecting(client); len(got) != 1 || got[0] != "out" {
		t.Errorf("Selecting(client) = %v, want [out]", got)
	}
}
