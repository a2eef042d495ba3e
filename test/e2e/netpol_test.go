//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// tcpOpen reports whether a TCP SYN from the pod to addr:port is answered:
// nothing listens in the pods, so an answered SYN is refused at once,
// while one a policy drops times out.
func tcpOpen(t *testing.T, e *harness.Env, ns, pod, addr string, port int) bool {
	t.Helper()
	out, stderr, err := testbed.Exec(testbed.Context(t, time.Minute), e.Rest, ns, pod, "main",
		"nc", "-w", "2", addr, fmt.Sprint(port))
	msg := out + stderr
	switch {
	case strings.Contains(msg, "refused"):
		return true
	case strings.Contains(msg, "timed out") || err != nil:
		return false
	}
	t.Fatalf("nc %s:%d from %s/%s: unexpected answer %q (%v)", addr, port, ns, pod, msg, err)
	return false
}

type probe struct {
	from   string // "a" (client in the server's namespace) or "b" (client of namespace b)
	port   int
	expect bool
}

// NetworkPolicies labelled for netclass isolate pods on their netclass
// attachment, in place on running pods; unlabelled ones and another
// controller's are ignored; the pods' primary interface is never filtered.
// Each scenario's expected verdicts are written out from the policy's
// meaning; every probe is TCP over net1 to the server.
func TestNetworkPolicyOnNetclassAttachments(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "e2e"+harness.Unique(6), "e2e-pol-"+harness.Unique(6)
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, harness.RandomSubnet()), nil, bridge)
	nsA, nsB := testbed.Namespace(t, e.Kube), testbed.Namespace(t, e.Kube)
	labelNamespace(t, e, nsB, map[string]string{"team": "b"})
	e.WaitDevice(t, class, "", pn, true)
	e.ClaimTemplate(t, nsA, "net", class, "", pn, nil)
	e.ClaimTemplate(t, nsB, "net", class, "", pn, nil)
	server := harness.PodOn(e.Node, nsA, "server", "net")
	server.Labels = map[string]string{"app": "server"}
	ca := harness.PodOn(e.Node, nsA, "client", "net")
	ca.Labels = map[string]string{"app": "client"}
	cb := harness.PodOn(e.Node, nsB, "client", "net")
	cb.Labels = map[string]string{"app": "client"}
	e.RunPods(t, server, ca, cb)
	addr := harness.Addr(t, e.Attached(t, nsA, "server", "net", "net1"))
	e.Attached(t, nsA, "client", "net", "net1")
	e.Attached(t, nsB, "client", "net", "net1")
	primary := getPod(t, e, nsA, "server").Status.PodIP
	pols := e.Kube.NetworkingV1().NetworkPolicies(nsA)

	labelled := func(name string, spec networkingv1.NetworkPolicySpec, controller string) *networkingv1.NetworkPolicy {
		p := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: nsA}, Spec: spec}
		if controller != "" {
			p.Labels = map[string]string{contract.PolicyControllerLabel: controller}
		}
		return p
	}
	onServer := metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}
	tcp80 := []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(80))}}
	scenarios := []struct {
		name   string
		policy *networkingv1.NetworkPolicy // nil: none
		probes []probe
	}{
		{"no policy", nil, []probe{{"a", 80, true}, {"b", 81, true}}},
		{"default-deny ingress", labelled("deny", networkingv1.NetworkPolicySpec{PodSelector: onServer}, contract.PolicyController),
			[]probe{{"a", 80, false}, {"b", 80, false}}},
		{"the same policy unlabelled: ignored", labelled("deny", networkingv1.NetworkPolicySpec{PodSelector: onServer}, ""),
			[]probe{{"a", 80, true}, {"b", 80, true}}},
		{"labelled for another controller: ignored", labelled("deny", networkingv1.NetworkPolicySpec{PodSelector: onServer}, "other.example.com"),
			[]probe{{"a", 80, true}}},
		{"labelled none: ignored", labelled("deny", networkingv1.NetworkPolicySpec{PodSelector: onServer}, "none"),
			[]probe{{"a", 80, true}}},
		{"from a podSelector on TCP 80", labelled("deny", networkingv1.NetworkPolicySpec{PodSelector: onServer,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}}, Ports: tcp80}}}, contract.PolicyController),
			[]probe{{"a", 80, true}, {"a", 81, false}, {"b", 80, false}}},
		{"from a namespaceSelector", labelled("deny", networkingv1.NetworkPolicySpec{PodSelector: onServer,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}}}}}}, contract.PolicyController),
			[]probe{{"a", 80, false}, {"b", 80, true}, {"b", 81, true}}},
	}
	for _, sc := range scenarios {
		ctx := testbed.Context(t, time.Minute)
		if err := pols.Delete(ctx, "deny", metav1.DeleteOptions{}); err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatal(err)
		}
		if sc.policy != nil {
			if _, err := pols.Create(ctx, sc.policy, metav1.CreateOptions{}); err != nil {
				t.Fatalf("%s: %v", sc.name, err)
			}
		}
		start := time.Now()
		for _, p := range sc.probes {
			ns := map[string]string{"a": nsA, "b": nsB}[p.from]
			testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond,
				fmt.Sprintf("%s: %s/client to server:%d over net1 open=%v", sc.name, ns, p.port, p.expect),
				func(context.Context) (bool, string, error) {
					got := tcpOpen(t, e, ns, "client", addr, p.port)
					return got == p.expect, fmt.Sprint("open=", got), nil
				})
		}
		t.Logf("%s: every probe as expected after %v", sc.name, time.Since(start).Round(10*time.Millisecond))
		if !tcpOpen(t, e, nsA, "client", primary, 81) {
			t.Errorf("%s: the server's primary interface (%s) is filtered", sc.name, primary)
		}
	}
}

func labelNamespace(t *testing.T, e *harness.Env, ns string, labels map[string]string) {
	t.Helper()
	n, err := e.Kube.CoreV1().Namespaces().Get(testbed.Context(t, time.Minute), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	if _, err := e.Kube.CoreV1().Namespaces().Update(testbed.Context(t, time.Minute), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
