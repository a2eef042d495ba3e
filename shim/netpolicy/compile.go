// Package netpolicy compiles the networking.k8s.io/v1 NetworkPolicies
// labelled for netclass (api/contract.PolicyControllerLabel) into what one
// netclass attachment of a pod enforces (conf/netpol.Plan), with the v1
// semantics on that interface: a policy selects pods of its namespace; a
// selected pod is isolated in the policy's directions and allowed the union
// of the rules of every policy selecting it; peers given by pod and
// namespace selectors are the selected pods' addresses on the same network;
// ipBlocks with except; ports by number, range (endPort) or name (the
// destination pod's: the target's for ingress, each peer's for egress). It is
// pure but for the peer resolution it is handed.
package netpolicy

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/peers"
)

// Peers resolves a rule's pod and namespace selectors to the selected
// pods' endpoints on the network (shim/peers.Resolver).
type Peers interface {
	Endpoints(namespace string, to ncv1.Destination, net network.Network) ([]peers.Endpoint, error)
}

// Target is the attachment a policy may select: its pod and its network.
type Target struct {
	Namespace string
	Labels    map[string]string
	// NamespaceLabels are the labels of the pod's namespace (a
	// ClusterNetworkPolicy's subject selects namespaces by them).
	NamespaceLabels map[string]string
	// Ports are the pod's container ports (named ports resolve against them).
	Ports   []corev1.ContainerPort
	Network network.Network
	// Known, when set, says whether a scoping annotation's entry (a
	// PodNetwork's name, a Network's namespace/name) names a network.
	Known func(entry string) bool
}

// RuleError is a part of a policy left out of a plan (which only narrows
// what the plan allows).
type RuleError struct {
	// Kind is the policy's: KindNetworkPolicy (or empty),
	// KindMultiNetworkPolicy or KindClusterNetworkPolicy (whose Namespace
	// is empty).
	Kind            string
	Namespace, Name string
	// Path is the part: podSelector, ingress[i], egress[i].
	Path string
	Err  error
}

func (e *RuleError) Error() string {
	if e.Namespace == "" {
		return fmt.Sprintf("%s %s %s: %v", cmp.Or(e.Kind, KindNetworkPolicy), e.Name, e.Path, e.Err)
	}
	return fmt.Sprintf("%s %s/%s %s: %v", cmp.Or(e.Kind, KindNetworkPolicy), e.Namespace, e.Name, e.Path, e.Err)
}

func (e *RuleError) Unwrap() error { return e.Err }

// RuleErrors lists the RuleErrors of Compile's error.
func RuleErrors(err error) []*RuleError {
	switch e := err.(type) {
	case *RuleError:
		return []*RuleError{e}
	case interface{ Unwrap() []error }:
		var out []*RuleError
		for _, inner := range e.Unwrap() {
			out = append(out, RuleErrors(inner)...)
		}
		return out
	}
	return nil
}

// Enforced reports whether a NetworkPolicy is netclass's: labelled with
// netclass's name as its policy controller.
func Enforced(p *networkingv1.NetworkPolicy) bool {
	return p.Labels[contract.PolicyControllerLabel] == contract.PolicyController
}

// Compile returns the plan of the attachment and the names of the
// NetworkPolicies that select it (CompileAll with no MultiNetworkPolicy).
func Compile(pols []*networkingv1.NetworkPolicy, t Target, peers Peers) (netpol.Plan, []string, error) {
	plan, sel, err := CompileAll(Policies{NetworkPolicies: pols}, t, peers)
	return plan, sel.NetworkPolicies, err
}

// CompileAll returns the plan of the attachment and the policies that
// select it: the union, with v1's semantics, of the NetworkPolicies that
// are netclass's and the MultiNetworkPolicies whose policy-for names the
// attachment's network, between the Admin and Baseline tiers of the
// ClusterNetworkPolicies that are netclass's and select the pod (cluster.go,
// compiled first: they have the attachment's bounds first); the others are
// ignored as if they did not exist. A rule that cannot be compiled is left
// out, which can only narrow what is allowed (a ClusterNetworkPolicy's Deny
// or Pass denies everything instead), and reported in the error (its
// RuleError's Kind says which kind of policy it is of).
func CompileAll(in Policies, t Target, peers Peers) (netpol.Plan, Selected, error) {
	var plan netpol.Plan
	var sel Selected
	var errs []error
	sel.ClusterNetworkPolicies, errs = addCluster(&plan, in.Cluster, t, peers)
	for _, p := range in.ordered() {
		ok, err := selects(p, t)
		perr := []error{err}
		if ok {
			sel.add(p)
			perr = append(perr, addPolicy(&plan, p, t, peers)...)
		}
		errs = append(errs, stampKind(errors.Join(perr...), p))
	}
	return plan, sel, errors.Join(errs...)
}

// addPolicy adds the rules of a policy that selects the attachment.
func addPolicy(plan *netpol.Plan, p *networkingv1.NetworkPolicy, t Target, peers Peers) []error {
	var errs []error
	in, out := directions(p)
	if in {
		plan.Ingress.Isolated = true
		for i, r := range p.Spec.Ingress {
			errs = append(errs, addBounded(plan, &plan.Ingress, p, fmt.Sprintf("ingress[%d]", i), r.From, r.Ports, t, peers, true))
		}
	}
	if out {
		plan.Egress.Isolated = true
		for i, r := range p.Spec.Egress {
			errs = append(errs, addBounded(plan, &plan.Egress, p, fmt.Sprintf("egress[%d]", i), r.To, r.Ports, t, peers, false))
		}
	}
	return errs
}

// directions returns the policy's types: policyTypes when set, otherwise
// Ingress, and Egress when it has egress rules (the v1 defaulting).
func directions(p *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(p.Spec.PolicyTypes) == 0 {
		return true, len(p.Spec.Egress) > 0
	}
	return slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress),
		slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
}

// addBounded adds one rule's allows to the direction unless the rule, or
// the plan with it, is over the bounds (limits.go): then the rule is left
// out, with a RuleError.
func addBounded(plan *netpol.Plan, d *netpol.Direction, p *networkingv1.NetworkPolicy, path string, peers []networkingv1.NetworkPolicyPeer,
	ports []networkingv1.NetworkPolicyPort, t Target, res Peers, ingress bool) error {
	if err := ruleBounds(peers, ports); err != nil {
		return &RuleError{Namespace: p.Namespace, Name: p.Name, Path: path, Err: err}
	}
	n := len(d.Allow)
	err := addRule(d, p, path, uniquePeers(peers), ports, t, res, ingress)
	if berr := withinBudget(plan); berr != nil {
		d.Allow = d.Allow[:n]
		return errors.Join(err, &RuleError{Namespace: p.Namespace, Name: p.Name, Path: path, Err: berr})
	}
	return err
}

// addRule appends one rule's allows to the direction. In an egress rule a
// named port is the destination pod's: those ports get an allow per
// destination endpoint (addNamedEgress), the others one for all peers.
func addRule(d *netpol.Direction, p *networkingv1.NetworkPolicy, path string, peers []networkingv1.NetworkPolicyPeer,
	ports []networkingv1.NetworkPolicyPort, t Target, res Peers, ingress bool) error {
	if ingress {
		return addAllow(d, p, path, peers, ports, t.Ports, t, res)
	}
	numbered, named := splitNamed(ports)
	var errs []error
	if len(numbered) > 0 || len(named) == 0 {
		errs = append(errs, addAllow(d, p, path, peers, numbered, nil, t, res))
	}
	if len(named) > 0 {
		errs = append(errs, addNamedEgress(d, p, path, peers, named, t, res))
	}
	return errors.Join(errs...)
}

// addAllow appends the allow of the peers on the ports, named ports
// resolving against owned (the target's own container ports, for ingress);
// one that allows nothing (its peers resolve to no address, its named
// ports to no port) adds nothing.
func addAllow(d *netpol.Direction, p *networkingv1.NetworkPolicy, path string, peers []networkingv1.NetworkPolicyPeer,
	ports []networkingv1.NetworkPolicyPort, owned []corev1.ContainerPort, t Target, res Peers) error {
	allow := netpol.Allow{}
	var err error
	if allow.Ports, err = portRanges(ports, owned); err != nil {
		return &RuleError{Namespace: p.Namespace, Name: p.Name, Path: path, Err: err}
	}
	if len(ports) > 0 && len(allow.Ports) == 0 {
		return nil // only named ports the pod does not have
	}
	if len(peers) > 0 {
		if allow.V4, allow.V6, err = rangesOf(p, peers, t, res); err != nil {
			return &RuleError{Namespace: p.Namespace, Name: p.Name, Path: path, Err: err}
		}
		if v4, v6 := allow.Families(); !v4 && !v6 {
			return nil // no peer has an address on the network
		}
	}
	d.Allow = append(d.Allow, allow)
	return nil
}

// addNamedEgress allows each destination endpoint the named ports its own
// pods have, one allow per set of ports (the pods of one workload name a
// port alike: one allow for all of them, however many there are). No
// peers means every pod on the network; an ipBlock peer has no pod to
// name a port and is left out.
func addNamedEgress(d *netpol.Direction, p *networkingv1.NetworkPolicy, path string, peers []networkingv1.NetworkPolicyPeer,
	named []networkingv1.NetworkPolicyPort, t Target, res Peers) error {
	if len(peers) == 0 {
		peers = []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}
	}
	var groups []namedGroup
	var errs []error
	for i, peer := range peers {
		if peer.IPBlock != nil {
			errs = append(errs, &RuleError{Namespace: p.Namespace, Name: p.Name, Path: path,
				Err: fmt.Errorf("peer %d: a named port to an ipBlock (its addresses have no pod to name the port) is not supported", i)})
			continue
		}
		eps, err := res.Endpoints(p.Namespace, ncv1.Destination{PodSelector: peer.PodSelector, NamespaceSelector: peer.NamespaceSelector}, t.Network)
		if err != nil {
			errs = append(errs, &RuleError{Namespace: p.Namespace, Name: p.Name, Path: path, Err: fmt.Errorf("peer %d: %w", i, err)})
			continue
		}
		for _, ep := range eps {
			ports, err := portRanges(named, ep.Ports)
			if err != nil {
				errs = append(errs, &RuleError{Namespace: p.Namespace, Name: p.Name, Path: path, Err: err})
				break
			}
			if len(ports) > 0 {
				groups = addToGroup(groups, ports, ep.Addrs)
			}
		}
	}
	for _, g := range groups {
		v4, v6 := addrRanges(g.addrs)
		d.Allow = append(d.Allow, netpol.Allow{V4: v4, V6: v6, Ports: g.ports})
	}
	return errors.Join(errs...)
}

// namedGroup is the destinations whose named ports resolved alike.
type namedGroup struct {
	ports []netpol.PortRange
	addrs []netip.Addr
}

func addToGroup(groups []namedGroup, ports []netpol.PortRange, addrs []netip.Addr) []namedGroup {
	for i := range groups {
		if slices.Equal(groups[i].ports, ports) {
			groups[i].addrs = append(groups[i].addrs, addrs...)
			return groups
		}
	}
	return append(groups, namedGroup{ports: ports, addrs: slices.Clone(addrs)})
}

// splitNamed parts ports into those given by number (or none) and those
// given by name.
func splitNamed(ports []networkingv1.NetworkPolicyPort) (numbered, named []networkingv1.NetworkPolicyPort) {
	for _, p := range ports {
		if p.Port != nil && p.Port.Type == intstr.String {
			named = append(named, p)
		} else {
			numbered = append(numbered, p)
		}
	}
	return numbered, named
}

// peerRanges resolves the peers to address ranges on the target's network.
func peerRanges(p *networkingv1.NetworkPolicy, peers []networkingv1.NetworkPolicyPeer, t Target, res Peers) (v4, v6 []qos.Range, err error) {
	var blocks []qos.Peer
	for i, peer := range peers {
		if b := peer.IPBlock; b != nil {
			if err := validBlock(b); err != nil {
				return nil, nil, fmt.Errorf("peer %d: ipBlock: %w", i, err)
			}
			blocks = append(blocks, qos.Peer{IPBlock: &qos.IPBlock{CIDR: b.CIDR, Except: b.Except}})
			continue
		}
		eps, err := res.Endpoints(p.Namespace, ncv1.Destination{PodSelector: peer.PodSelector, NamespaceSelector: peer.NamespaceSelector}, t.Network)
		if err != nil {
			return nil, nil, fmt.Errorf("peer %d: %w", i, err)
		}
		for _, ep := range eps {
			blocks = append(blocks, hostBlocks(ep.Addrs)...)
		}
	}
	if len(blocks) == 0 {
		return []qos.Range{}, []qos.Range{}, nil
	}
	v4, v6 = qos.Destinations(blocks)
	return v4, v6, nil
}

// addrRanges is the ranges of a few addresses, per family (empty, never
// nil, for a family without any: nil would be every address).
func addrRanges(addrs []netip.Addr) (v4, v6 []qos.Range) {
	if len(addrs) == 0 {
		return []qos.Range{}, []qos.Range{}
	}
	return qos.Destinations(hostBlocks(addrs))
}

func hostBlocks(addrs []netip.Addr) []qos.Peer {
	out := make([]qos.Peer, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, qos.Peer{IPBlock: &qos.IPBlock{CIDR: netip.PrefixFrom(a, a.BitLen()).String()}})
	}
	return out
}

// validBlock checks what qos.Destinations needs (the API server validates
// it too; netclass-dra does not rely on that).
func validBlock(b *networkingv1.IPBlock) error {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return err
	}
	for _, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			return err
		}
		if ex.Addr().Is4() != cidr.Addr().Is4() {
			return fmt.Errorf("except %s is not of the family of %s", e, b.CIDR)
		}
	}
	return nil
}

// portRanges compiles the ports of a rule; a named port resolves against
// the container ports of the destination pod (owned).
func portRanges(ports []networkingv1.NetworkPolicyPort, owned []corev1.ContainerPort) ([]netpol.PortRange, error) {
	var out []netpol.PortRange
	for i, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		num, ok := protocols[proto]
		if !ok {
			return nil, fmt.Errorf("ports[%d]: protocol %q", i, proto)
		}
		switch {
		case p.Port == nil:
			out = append(out, netpol.PortRange{Proto: num})
		case p.Port.Type == intstr.String:
			for _, cp := range owned {
				if cp.Name == p.Port.StrVal && orTCP(cp.Protocol) == proto {
					out = append(out, netpol.PortRange{Proto: num, From: uint16(cp.ContainerPort), To: uint16(cp.ContainerPort)})
				}
			}
		default:
			if p.Port.IntVal < 1 || p.Port.IntVal > 65535 {
				return nil, fmt.Errorf("ports[%d]: port %d out of range", i, p.Port.IntVal)
			}
			r := netpol.PortRange{Proto: num, From: uint16(p.Port.IntVal), To: uint16(p.Port.IntVal)}
			if p.EndPort != nil {
				if *p.EndPort < p.Port.IntVal || *p.EndPort > 65535 {
					return nil, fmt.Errorf("ports[%d]: endPort %d is not between port %d and 65535", i, *p.EndPort, p.Port.IntVal)
				}
				r.To = uint16(*p.EndPort)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

func orTCP(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

var protocols = map[corev1.Protocol]uint8{corev1.ProtocolTCP: 6, corev1.ProtocolUDP: 17, corev1.ProtocolSCTP: 132}
