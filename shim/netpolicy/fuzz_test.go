package netpolicy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netclass-dev/netclass/api/contract"
)

// Shape bits of FuzzCompile's policy (what a fuzzed string cannot say).
const (
	shapeScoped     = 3 << 0 // annotation only when both bits are 0: most inputs are compiled
	shapeTypes      = 3 << 2 // policyTypes: default, Ingress, Egress, both
	shapeProto      = 3 << 4 // the ports' protocol: default (TCP), TCP, UDP, SCTP
	shapeEndPort    = 1 << 6
	shapeNoNumber   = 1 << 7 // the numbered port without its number: every port of the protocol
	shapeIPBlock    = 1 << 8 // the rules' peers, each bit one: none is every peer
	shapePodSel     = 1 << 9
	shapeNSSel      = 1 << 10
	shapeBothSel    = 1 << 11
	shapeNoPorts    = 1 << 12 // the rules name no port: every port
	shapeSelector   = 3 << 13 // the policy's podSelector: app=server (twice), everything, an expression
	shapeNamedProto = 1 << 15 // the named port has the numbered one's protocol (otherwise the default)
	shapeAnyDest    = 1 << 16 // egress also has a rule without peers
)

// FuzzCompile: whatever a tenant writes in a labelled policy (its types
// and pod selector; peers by ipBlock with except, pod and namespace
// selector; ports by number, range, or name, resolved against the pod for
// ingress and against each peer for egress, of each protocol) and in its
// scoping annotation (fuzzed apart, so most inputs reach the rules'
// compilation), Compile never panics, names the policy exactly when the
// oracle (test/e2e/policyeval, written apart from this package) says it
// selects the pod, and the plan of the pod's attachment never lets through
// a connection the oracle denies, on a small world of pods (oracle_test.go).
// For a policy the API server accepts and nothing reported left out, the
// plan allows exactly what the oracle allows.
func FuzzCompile(f *testing.F) {
	f.Add(uint32(0), "10.0.0.0/8", "10.1.0.0/16", "blue,t1/red", "http", int32(80), int32(90))
	f.Add(uint32(shapeIPBlock|shapePodSel|shapeEndPort|shapeAnyDest), "10.0.0.0/8", "10.1.0.0/16", "", "http", int32(80), int32(90))
	f.Add(uint32(1|3<<2|shapeIPBlock|shapePodSel|shapeNSSel|shapeBothSel), "::/0", "fd00::4/126", "", "", int32(0), int32(-1))
	f.Add(uint32(2|2<<2|2<<4|shapePodSel|shapeNamedProto), "10.0.0.0/33", "x", ",,/", "dns", int32(70000), int32(1))
	f.Add(uint32(1|3<<2|1<<4|shapeNSSel|shapeEndPort|2<<13), "0.0.0.0/0", "", "", "http", int32(9000), int32(9010))
	f.Add(uint32(3|2<<2|3<<4|shapeNoNumber|shapeBothSel|3<<13), "fd00::/8", "fd00::/16", "", "sig", int32(1), int32(0))
	f.Add(uint32(1|1<<2|shapeNoPorts|shapeIPBlock), "10.0.0.0/24", "10.0.0.2/31", "", "", int32(0), int32(0))
	f.Add(uint32(0), "10.0.0.0/8", "", " blue ", "http", int32(80), int32(80))
	f.Fuzz(func(t *testing.T, shape uint32, cidr, except, networks, portName string, port, end int32) {
		w := newOracleWorld()
		p := fuzzPolicy(shape, cidr, except, networks, portName, port, end)
		pols := []*networkingv1.NetworkPolicy{p}
		plan, selected, err := Compile(pols, w.target(), w)
		world := w.world(pols)
		if want := world.Selecting(w.server()); len(selected) != len(want) || len(want) == 1 && selected[0] != want[0] {
			t.Fatalf("Compile names %v, the oracle %v\npolicy %s", selected, want, describe(p))
		}
		exact := err == nil && apiValid(p)
		for _, pr := range w.probes(port, end) {
			got, want := planAllows(plan, pr), w.oracle(world, pr)
			if got && !want {
				t.Fatalf("%s: the plan allows it, the oracle denies it\npolicy %s\nplan %+v\nleft out: %v", pr, describe(p), plan, err)
			}
			if exact && got != want {
				t.Fatalf("%s: the plan denies it, the oracle allows it, and nothing was left out\npolicy %s\nplan %+v", pr, describe(p), plan)
			}
		}
	})
}

// fuzzPolicy is FuzzCompile's policy: labelled for netclass, in the
// server's namespace, its shape given by the bits of shape.
func fuzzPolicy(shape uint32, cidr, except, networks, portName string, port, end int32) *networkingv1.NetworkPolicy {
	return policy("fuzz", func(p *networkingv1.NetworkPolicy) {
		if shape&shapeScoped == 0 {
			p.Annotations = map[string]string{contract.AnnotationPolicyNetworks: networks}
		}
		p.Spec.PodSelector = fuzzSelector(shape)
		p.Spec.PolicyTypes = [][]networkingv1.PolicyType{nil, {networkingv1.PolicyTypeIngress}, {networkingv1.PolicyTypeEgress},
			{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}}[shape&shapeTypes>>2]
		ports := fuzzPorts(shape, portName, port, end)
		peers := fuzzPeers(shape, cidr, except)
		p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: ports}}
		p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: peers, Ports: ports}}
		if shape&shapeAnyDest != 0 {
			p.Spec.Egress = append(p.Spec.Egress, networkingv1.NetworkPolicyEgressRule{Ports: ports})
		}
	})
}

func fuzzSelector(shape uint32) metav1.LabelSelector {
	switch shape & shapeSelector >> 13 {
	case 2:
		return metav1.LabelSelector{}
	case 3:
		return metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"server", "web"}}}}
	}
	return metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}
}

func fuzzPorts(shape uint32, portName string, port, end int32) []networkingv1.NetworkPolicyPort {
	if shape&shapeNoPorts != 0 {
		return nil
	}
	proto := []*corev1.Protocol{nil, ptrTo(corev1.ProtocolTCP), ptrTo(corev1.ProtocolUDP), ptrTo(corev1.ProtocolSCTP)}[shape&shapeProto>>4]
	numbered := networkingv1.NetworkPolicyPort{Protocol: proto, Port: &intstr.IntOrString{Type: intstr.Int, IntVal: port}}
	if shape&shapeNoNumber != 0 {
		numbered.Port = nil
	}
	if shape&shapeEndPort != 0 {
		numbered.EndPort = &end
	}
	ports := []networkingv1.NetworkPolicyPort{numbered}
	if portName != "" {
		named := networkingv1.NetworkPolicyPort{Port: &intstr.IntOrString{Type: intstr.String, StrVal: portName}}
		if shape&shapeNamedProto != 0 {
			named.Protocol = proto
		}
		ports = append(ports, named)
	}
	return ports
}

func fuzzPeers(shape uint32, cidr, except string) []networkingv1.NetworkPolicyPeer {
	var peers []networkingv1.NetworkPolicyPeer
	if shape&shapeIPBlock != 0 {
		b := &networkingv1.IPBlock{CIDR: cidr}
		if except != "" {
			b.Except = []string{except}
		}
		peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: b})
	}
	if shape&shapePodSel != 0 {
		peers = append(peers, from("client"))
	}
	teamB := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}}
	if shape&shapeNSSel != 0 {
		peers = append(peers, networkingv1.NetworkPolicyPeer{NamespaceSelector: teamB})
	}
	if shape&shapeBothSel != 0 {
		peers = append(peers, networkingv1.NetworkPolicyPeer{NamespaceSelector: teamB,
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
	}
	return peers
}

func ptrTo[T any](v T) *T { return &v }
