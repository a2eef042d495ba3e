package netpolicy

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/peers"
	"github.com/netclass-dev/netclass/test/e2e/policyeval"
)

// oracleWorld is a small cluster on network blue for comparing Compile
// with policyeval (the e2e truth table's oracle, written apart from this
// package): pods in two namespaces, IPv4 and IPv6, with named ports. The
// attachment compiled is server's; it is also the Peers Compile resolves
// selectors with (as shim/peers does: no namespaceSelector is the policy's
// namespace, no podSelector every pod).
type oracleWorld struct {
	namespaces map[string]map[string]string
	pods       []policyeval.Pod
}

func newOracleWorld() *oracleWorld {
	pod := func(ns, name, app, addr string, ports ...corev1.ContainerPort) policyeval.Pod {
		return policyeval.Pod{Namespace: ns, Name: name, Labels: map[string]string{"app": app}, Addr: netip.MustParseAddr(addr), Ports: ports}
	}
	http := func(port int32) corev1.ContainerPort { return corev1.ContainerPort{Name: "http", ContainerPort: port} }
	return &oracleWorld{
		namespaces: map[string]map[string]string{
			"t1": {"team": "a", "kubernetes.io/metadata.name": "t1"},
			"t2": {"team": "b", "kubernetes.io/metadata.name": "t2"},
		},
		pods: []policyeval.Pod{
			pod("t1", "server", "server", "10.0.0.1", http(8080), corev1.ContainerPort{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}),
			pod("t1", "client", "client", "10.0.0.2", http(8002)),
			pod("t1", "other", "other", "10.0.0.3"),
			pod("t2", "client", "client", "10.1.0.4", http(9004), corev1.ContainerPort{Name: "sig", ContainerPort: 9100, Protocol: corev1.ProtocolSCTP}),
			pod("t2", "web", "web", "fd00::5", http(8080)),
		},
	}
}

// server is the pod whose attachment is compiled.
func (w *oracleWorld) server() policyeval.Pod { return w.pods[0] }

func (w *oracleWorld) target() Target {
	s := w.server()
	return Target{Namespace: s.Namespace, Labels: s.Labels, NamespaceLabels: w.namespaces[s.Namespace], Ports: s.Ports, Network: blue}
}

// Endpoints implements Peers over the world's pods.
func (w *oracleWorld) Endpoints(namespace string, to ncv1.Destination, _ network.Network) ([]peers.Endpoint, error) {
	nsSel, podSel := labels.Nothing(), labels.Everything()
	var err error
	if to.NamespaceSelector != nil {
		if nsSel, err = metav1.LabelSelectorAsSelector(to.NamespaceSelector); err != nil {
			return nil, err
		}
	}
	if to.PodSelector != nil {
		if podSel, err = metav1.LabelSelectorAsSelector(to.PodSelector); err != nil {
			return nil, err
		}
	}
	var out []peers.Endpoint
	for _, p := range w.pods {
		inNS := nsSel.Matches(labels.Set(w.namespaces[p.Namespace]))
		if to.NamespaceSelector == nil {
			inNS = p.Namespace == namespace
		}
		if inNS && podSel.Matches(labels.Set(p.Labels)) {
			out = append(out, peers.Endpoint{Addrs: []netip.Addr{p.Addr}, Ports: p.Ports})
		}
	}
	return out, nil
}

// probe is one connection of server's: from peer to server's port
// (ingress), or from server to peer's port (egress).
type probe struct {
	peer    policyeval.Pod
	proto   corev1.Protocol
	port    int32
	ingress bool
}

func (p probe) String() string {
	dir := "egress to"
	if p.ingress {
		dir = "ingress from"
	}
	return fmt.Sprintf("%s %s/%s (%s) %s/%d", dir, p.peer.Namespace, p.peer.Name, p.peer.Addr, p.proto, p.port)
}

// probes are the connections of server with every other pod, both ways,
// on TCP, UDP and SCTP, on the pods' ports and around the given ones.
func (w *oracleWorld) probes(around ...int32) []probe {
	ports := []int32{53, 80, 8002, 8080, 9004, 9100}
	for _, p := range around {
		for _, q := range []int32{p - 1, p, p + 1} {
			if q >= 1 && q <= 65535 {
				ports = append(ports, q)
			}
		}
	}
	var out []probe
	for _, peer := range w.pods[1:] {
		for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
			for _, port := range ports {
				out = append(out, probe{peer, proto, port, true}, probe{peer, proto, port, false})
			}
		}
	}
	return out
}

// world is the oracle's world with the policies.
func (w *oracleWorld) world(pols []*networkingv1.NetworkPolicy) policyeval.World {
	return policyeval.World{Policies: pols, Namespaces: w.namespaces, Network: blue.Ref.Name}
}

// oracle is policyeval's verdict on server's side of the connection.
func (w *oracleWorld) oracle(world policyeval.World, p probe) bool {
	if p.ingress {
		return world.Ingress(w.server(), p.peer, p.proto, p.port)
	}
	return world.Egress(w.server(), p.peer, p.proto, p.port)
}

// planAllows is what a plan lets through on server's attachment, read as
// conf/netpol documents it (the kernel rendering is tested against the
// same reading in plugins/kernel/nft): the Admin verdicts, then the allows
// when isolated, else the Baseline verdicts.
func planAllows(plan netpol.Plan, p probe) bool {
	d := plan.Egress
	if p.ingress {
		d = plan.Ingress
	}
	if v, decided := firstVerdict(d.Admin, p, false); decided {
		return v
	}
	if d.Isolated {
		for _, a := range d.Allow {
			if allowMatches(a, p) {
				return true
			}
		}
		return false
	}
	if v, decided := firstVerdict(d.Baseline, p, true); decided {
		return v
	}
	return true
}

// firstVerdict is the first matching verdict's; a Pass decides passOK.
func firstVerdict(vs []netpol.Verdict, p probe, passOK bool) (verdict, decided bool) {
	for _, v := range vs {
		if !allowMatches(v.Match, p) {
			continue
		}
		switch v.Action {
		case netpol.Accept:
			return true, true
		case netpol.Deny:
			return false, true
		}
		return passOK, passOK
	}
	return false, false
}

func allowMatches(a netpol.Allow, p probe) bool {
	ranges := a.V6
	if p.peer.Addr.Is4() {
		ranges = a.V4
	}
	return inRanges(ranges, p.peer.Addr) && onPorts(a.Ports, protocols[p.proto], p.port)
}

func inRanges(ranges []qos.Range, a netip.Addr) bool {
	if ranges == nil {
		return true
	}
	for _, r := range ranges {
		if r.From.Compare(a) <= 0 && a.Compare(r.To) <= 0 {
			return true
		}
	}
	return false
}

func onPorts(ports []netpol.PortRange, proto uint8, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, r := range ports {
		if r.Proto == proto && (r.From == 0 || int32(r.From) <= port && port <= int32(r.To)) {
			return true
		}
	}
	return false
}

// portName and hasLetter are the API server's IANA_SVC_NAME check of a
// named port (with at most 15 characters).
var (
	portName  = regexp.MustCompile(`^[a-z0-9]([a-z0-9]|-[a-z0-9])*$`)
	hasLetter = regexp.MustCompile(`[a-z]`)
)

// apiValid reports whether the API server would accept the parts of a
// NetworkPolicy the fuzz target varies (ports, endPort, ipBlocks): the
// objects netclass-dra can be handed. The oracle follows the API's
// documentation, which says nothing of the others.
func apiValid(p *networkingv1.NetworkPolicy) bool {
	for _, r := range p.Spec.Ingress {
		if !validPorts(r.Ports) || !validPeers(r.From) {
			return false
		}
	}
	for _, r := range p.Spec.Egress {
		if !validPorts(r.Ports) || !validPeers(r.To) {
			return false
		}
	}
	return true
}

func validPorts(ports []networkingv1.NetworkPolicyPort) bool {
	for _, p := range ports {
		if p.Protocol != nil && protocols[*p.Protocol] == 0 {
			return false
		}
		switch {
		case p.Port == nil:
			if p.EndPort != nil {
				return false
			}
		case p.Port.Type == intstr.String:
			n := p.Port.StrVal
			if len(n) > 15 || !portName.MatchString(n) || !hasLetter.MatchString(n) || p.EndPort != nil {
				return false
			}
		case p.Port.IntVal < 1 || p.Port.IntVal > 65535:
			return false
		case p.EndPort != nil && (*p.EndPort < p.Port.IntVal || *p.EndPort > 65535):
			return false
		}
	}
	return true
}

func validPeers(peers []networkingv1.NetworkPolicyPeer) bool {
	for _, peer := range peers {
		b := peer.IPBlock
		if b == nil {
			continue
		}
		cidr, err := netip.ParsePrefix(b.CIDR)
		if err != nil {
			return false
		}
		for _, e := range b.Except {
			ex, err := netip.ParsePrefix(e)
			if err != nil || ex.Addr().Is4() != cidr.Addr().Is4() || ex.Bits() <= cidr.Bits() || !cidr.Contains(ex.Addr()) {
				return false
			}
		}
	}
	return true
}

// describe is the policy's annotations and spec, as JSON.
func describe(p *networkingv1.NetworkPolicy) string {
	b, err := json.Marshal(struct {
		Annotations map[string]string
		Spec        networkingv1.NetworkPolicySpec
	}{p.Annotations, p.Spec})
	if err != nil {
		return err.Error()
	}
	return string(b)
}
