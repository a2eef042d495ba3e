package netpolicy

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netclass-dev/netclass/api/contract"
)

// Whatever a tenant writes in a labelled policy's ipBlock, ports (named
// ones resolved against the pod and against peers, both ways) and scoping
// annotation, Compile returns (an error at worst), never panics.
func FuzzCompile(f *testing.F) {
	f.Add("10.0.0.0/8", "10.1.0.0/16", "blue,t1/red", "http", int32(80), int32(90))
	f.Add("::/0", "10.0.0.0/8", "", "", int32(0), int32(-1))
	f.Add("10.0.0.0/33", "x", ",,/", "dns", int32(70000), int32(1))
	f.Fuzz(func(t *testing.T, cidr, except, networks, portName string, port, end int32) {
		p := policy("fuzz", func(p *networkingv1.NetworkPolicy) {
			p.Annotations = map[string]string{contract.AnnotationPolicyNetworks: networks}
			ports := []networkingv1.NetworkPolicyPort{{Port: &intstr.IntOrString{Type: intstr.Int, IntVal: port}, EndPort: &end}}
			if portName != "" {
				ports = append(ports, networkingv1.NetworkPolicyPort{Port: &intstr.IntOrString{Type: intstr.String, StrVal: portName}})
			}
			peers := []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: []string{except}}},
				{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}}
			p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: peers, Ports: ports}}
			p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: ports}, {To: peers, Ports: ports}}
		})
		target := Target{Namespace: "t1", Labels: map[string]string{"app": "server"}, Network: blue}
		Compile([]*networkingv1.NetworkPolicy{p}, target, peersByLabel{"client": "10.0.0.2", "other": "10.0.0.3"})
	})
}
