//go:build testbed

package e2e

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// The truth table's policies are built from these: np makes a policy
// labelled for netclass, each option edits it.

type polOption func(*networkingv1.NetworkPolicy)

func np(ns, name string, podSelector map[string]string, opts ...polOption) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: podSelector}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func pols(p ...*networkingv1.NetworkPolicy) []*networkingv1.NetworkPolicy { return p }

// with returns a copy of the policy with the options applied.
func with(p *networkingv1.NetworkPolicy, opts ...polOption) *networkingv1.NetworkPolicy {
	p = p.DeepCopy()
	for _, o := range opts {
		o(p)
	}
	return p
}

func unlabelled(p *networkingv1.NetworkPolicy) { p.Labels = nil }

func controller(name string) polOption {
	return func(p *networkingv1.NetworkPolicy) { p.Labels[contract.PolicyControllerLabel] = name }
}

func scoped(networks string) polOption {
	return func(p *networkingv1.NetworkPolicy) {
		p.Annotations = map[string]string{contract.AnnotationPolicyNetworks: networks}
	}
}

func policyTypes(t ...networkingv1.PolicyType) polOption {
	return func(p *networkingv1.NetworkPolicy) { p.Spec.PolicyTypes = t }
}

var (
	ingressOnly = policyTypes(networkingv1.PolicyTypeIngress)
	egressOnly  = policyTypes(networkingv1.PolicyTypeEgress)
	bothWays    = policyTypes(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress)
)

// from adds an ingress rule from the peers, on every port.
func from(peers ...networkingv1.NetworkPolicyPeer) polOption {
	return func(p *networkingv1.NetworkPolicy) {
		p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: peers})
	}
}

// fromOn adds an ingress rule from one peer on the ports.
func fromOn(peer networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) polOption {
	return func(p *networkingv1.NetworkPolicy) {
		p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{peer}, Ports: ports})
	}
}

// ports adds an ingress rule from everyone on the ports.
func ports(ports ...networkingv1.NetworkPolicyPort) polOption {
	return func(p *networkingv1.NetworkPolicy) {
		p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{Ports: ports})
	}
}

// to adds an egress rule to one peer on the ports (none: every port).
func to(peer networkingv1.NetworkPolicyPeer, ports ...networkingv1.NetworkPolicyPort) polOption {
	return func(p *networkingv1.NetworkPolicy) {
		p.Spec.Egress = append(p.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{peer}, Ports: ports})
	}
}

func peer(namespaces, pods *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: namespaces, PodSelector: pods}
}

func sel(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

func port(proto corev1.Protocol, p intstr.IntOrString, end *int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p, EndPort: end}
}

func labelNamespace(t *testing.T, e *harness.Env, ns string, labels map[string]string) {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	n, err := e.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	if _, err := e.Kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
