package netpolicy

import (
	"errors"
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/network"
)

// selects reports whether the policy is netclass's on the target's
// network and selects the pod: a NetworkPolicy labelled for netclass (and
// scoped by its optional annotation), a MultiNetworkPolicy (FromMulti)
// whose policy-for names the network.
func selects(p *networkingv1.NetworkPolicy, t Target) (bool, error) {
	if p.Namespace != t.Namespace {
		return false, nil
	}
	if isMulti(p) {
		names, _ := ParsePolicyFor(p.Annotations[contract.AnnotationPolicyFor]) // a malformed entry names nothing
		if !ForNetwork(names, p.Namespace, t.Network) {
			return false, nil
		}
	} else {
		if !Enforced(p) {
			return false, nil
		}
		if !onNetwork(p, t.Network) {
			return false, scopeError(p, t.Known)
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if err != nil {
		return false, &RuleError{Namespace: p.Namespace, Name: p.Name, Path: "podSelector", Err: err}
	}
	return sel.Matches(labels.Set(t.Labels)), nil
}

// ScopePath is the path of a RuleError about the scoping annotation.
const ScopePath = "metadata.annotations[" + contract.AnnotationPolicyNetworks + "]"

// scopeError says what is wrong with a policy's scoping annotation, which
// then applies nowhere a user meant: empty, an entry neither a name nor
// namespace/name, or naming no network known (known nil: not checked).
func scopeError(p *networkingv1.NetworkPolicy, known func(entry string) bool) error {
	list := p.Annotations[contract.AnnotationPolicyNetworks]
	var bad []string
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		ns, name, _ := strings.Cut(entry, "/")
		switch {
		case entry == "" || strings.Contains(name, "/") || (strings.Contains(entry, "/") && (ns == "" || name == "")):
			bad = append(bad, fmt.Sprintf("%q is neither a PodNetwork's name nor a Network's namespace/name", entry))
		case known != nil && !known(entry):
			bad = append(bad, fmt.Sprintf("%q names no PodNetwork or Network", entry))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &RuleError{Namespace: p.Namespace, Name: p.Name, Path: ScopePath, Err: errors.New(strings.Join(bad, "; "))}
}

// onNetwork applies a NetworkPolicy's optional scoping annotation. An
// attachment through a NAD netclass-controller generated is on the network
// behind it too: naming that network covers it, whichever namespace's NAD
// the pod named.
func onNetwork(p *networkingv1.NetworkPolicy, n network.Network) bool {
	list, ok := p.Annotations[contract.AnnotationPolicyNetworks]
	if !ok {
		return true
	}
	return scopeNames(list, n) || n.Backing != nil && scopeNames(list, network.Network{Ref: *n.Backing})
}

// scopeNames reports whether an entry of the scoping annotation names n.
func scopeNames(list string, n network.Network) bool {
	for _, entry := range strings.Split(list, ",") {
		entry = strings.TrimSpace(entry)
		ns, name, namespaced := strings.Cut(entry, "/")
		switch {
		case namespaced && n.Ref.Kind == network.NetworkGVK.Kind && n.Ref.Namespace == ns && n.Ref.Name == name:
			return true
		case namespaced && n.IsNAD() && n.Ref.Namespace == ns && n.Ref.Name == name:
			return true
		case !namespaced && n.Ref.Kind == network.PodNetworkGVK.Kind && n.Ref.Name == entry:
			return true
		}
	}
	return false
}
