package netpolicy

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	mnpv1beta1 "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/apis/k8s.cni.cncf.io/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/network"
)

// The kinds of policy Compile reads.
const (
	KindNetworkPolicy      = "NetworkPolicy"
	KindMultiNetworkPolicy = "MultiNetworkPolicy"
)

// Policies are the policies of the target's namespace: NetworkPolicies
// (those labelled for netclass apply) and MultiNetworkPolicies (those
// whose policy-for names the target's network apply), and the cluster's
// ClusterNetworkPolicies.
type Policies struct {
	NetworkPolicies []*networkingv1.NetworkPolicy
	Multi           []*mnpv1beta1.MultiNetworkPolicy
	// Cluster are the ClusterNetworkPolicies (those labelled for netclass
	// whose subject selects the pod apply).
	Cluster []*cnpv1beta1.ClusterNetworkPolicy
}

// Selected names the policies of each kind that select an attachment, in
// order.
type Selected struct {
	NetworkPolicies, MultiNetworkPolicies []string
	// ClusterNetworkPolicies are in precedence order.
	ClusterNetworkPolicies []string
}

func (s *Selected) add(p *networkingv1.NetworkPolicy) {
	if isMulti(p) {
		s.MultiNetworkPolicies = append(s.MultiNetworkPolicies, p.Name)
	} else {
		s.NetworkPolicies = append(s.NetworkPolicies, p.Name)
	}
}

// ordered is the NetworkPolicies by name, then the MultiNetworkPolicies
// (FromMulti) by name: the order of a plan's allows.
func (in Policies) ordered() []*networkingv1.NetworkPolicy {
	out := slices.Clone(in.NetworkPolicies)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	multi := make([]*networkingv1.NetworkPolicy, 0, len(in.Multi))
	for _, m := range in.Multi {
		multi = append(multi, FromMulti(m))
	}
	sort.Slice(multi, func(i, j int) bool { return multi[i].Name < multi[j].Name })
	return append(out, multi...)
}

// isMulti reports whether the policy is a MultiNetworkPolicy (FromMulti).
func isMulti(p *networkingv1.NetworkPolicy) bool { return p.Kind == KindMultiNetworkPolicy }

// stampKind marks the RuleErrors of err as the policy's.
func stampKind(err error, p *networkingv1.NetworkPolicy) error {
	if isMulti(p) {
		for _, re := range RuleErrors(err) {
			re.Kind = KindMultiNetworkPolicy
		}
	}
	return err
}

// NetworkName is one entry of a MultiNetworkPolicy's policy-for: a bare
// name (Namespace empty) or namespace/name.
type NetworkName struct{ Namespace, Name string }

// ParsePolicyFor parses a policy-for annotation: comma-separated entries,
// spaces around each ignored, empty entries skipped, each a name or a
// namespace/name (DNS-1123 subdomain name, DNS-1123 label namespace).
// Entries of another form are left out and reported.
func ParsePolicyFor(value string) ([]NetworkName, error) {
	var out []NetworkName
	var errs []error
	for i, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		ns, name, namespaced := strings.Cut(entry, "/")
		if !namespaced {
			ns, name = "", entry
		}
		var bad []string
		if namespaced {
			bad = append(bad, prefixed("namespace ", validation.IsDNS1123Label(ns))...)
		}
		bad = append(bad, prefixed("name ", validation.IsDNS1123Subdomain(name))...)
		if len(bad) > 0 {
			errs = append(errs, fmt.Errorf("metadata.annotations[%s][%d]: %q: %s", contract.AnnotationPolicyFor, i, entry, strings.Join(bad, "; ")))
			continue
		}
		out = append(out, NetworkName{Namespace: ns, Name: name})
	}
	return out, errors.Join(errs...)
}

func prefixed(prefix string, msgs []string) []string {
	for i := range msgs {
		msgs[i] = prefix + msgs[i]
	}
	return msgs
}

// ForNetwork reports whether the entries of the policy-for of a policy in
// namespace ns name the network: namespace/name a Network; a bare name a
// PodNetwork of that name, or a Network of that name in ns (as Multus
// reads a bare name as a NetworkAttachmentDefinition of the policy's
// namespace). A NetworkAttachmentDefinition's network (an attachment
// Multus made) is named the same way: namespace/name, or a bare name in
// the policy's namespace.
func ForNetwork(names []NetworkName, ns string, n network.Network) bool {
	for _, e := range names {
		switch {
		case n.IsNAD() && n.Ref.Name == e.Name && (n.Ref.Namespace == e.Namespace || e.Namespace == "" && n.Ref.Namespace == ns):
			return true
		case n.Ref.Kind == network.NetworkGVK.Kind && n.Ref.Name == e.Name && n.Ref.Namespace == e.Namespace:
			return true
		case n.Ref.Kind == network.NetworkGVK.Kind && n.Ref.Name == e.Name && e.Namespace == "" && n.Ref.Namespace == ns:
			return true
		case n.Ref.Kind == network.PodNetworkGVK.Kind && n.Ref.Name == e.Name && e.Namespace == "":
			return true
		}
	}
	return false
}
