package netpolicy

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/netpol"
)

// KindClusterNetworkPolicy is the kind of a ClusterNetworkPolicy's
// RuleErrors (policy.networking.k8s.io/v1beta1).
const KindClusterNetworkPolicy = "ClusterNetworkPolicy"

// EnforcedCluster reports whether a ClusterNetworkPolicy is netclass's:
// labelled, as a NetworkPolicy, with netclass's name as its policy
// controller. One that is applies to every netclass attachment of the
// pods its subject selects, whatever their network.
func EnforcedCluster(p *cnpv1beta1.ClusterNetworkPolicy) bool {
	return p.Labels[contract.PolicyControllerLabel] == contract.PolicyController
}

// orderedCluster is the ClusterNetworkPolicies netclass enforces in
// precedence order: the Admin tier, then the Baseline one, each by priority
// (lower first) and, for equal priorities (which the API leaves to the
// implementation), by name.
func orderedCluster(in []*cnpv1beta1.ClusterNetworkPolicy) []*cnpv1beta1.ClusterNetworkPolicy {
	out := make([]*cnpv1beta1.ClusterNetworkPolicy, 0, len(in))
	for _, p := range in {
		if EnforcedCluster(p) {
			out = append(out, p)
		}
	}
	tier := func(t cnpv1beta1.Tier) int {
		if t == cnpv1beta1.AdminTier {
			return 0
		}
		return 1
	}
	slices.SortFunc(out, func(a, b *cnpv1beta1.ClusterNetworkPolicy) int {
		return cmp.Or(cmp.Compare(tier(a.Spec.Tier), tier(b.Spec.Tier)), cmp.Compare(a.Spec.Priority, b.Spec.Priority), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// subjectSelects reports whether the policy's subject selects the pod:
// namespaces by their labels, or pods by their namespace's and their own.
func subjectSelects(p *cnpv1beta1.ClusterNetworkPolicy, t Target) (bool, error) {
	s := p.Spec.Subject
	match := func(path string, sel *metav1.LabelSelector, set map[string]string) (bool, error) {
		ls, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return false, &RuleError{Kind: KindClusterNetworkPolicy, Name: p.Name, Path: path, Err: err}
		}
		return ls.Matches(labels.Set(set)), nil
	}
	switch {
	case s.Namespaces != nil:
		return match("subject.namespaces", s.Namespaces, t.NamespaceLabels)
	case s.Pods != nil:
		ok, err := match("subject.pods.namespaceSelector", &s.Pods.NamespaceSelector, t.NamespaceLabels)
		if !ok || err != nil {
			return false, err
		}
		return match("subject.pods.podSelector", &s.Pods.PodSelector, t.Labels)
	}
	return false, &RuleError{Kind: KindClusterNetworkPolicy, Name: p.Name, Path: "subject", Err: errors.New("neither namespaces nor pods: selects no pod")}
}

// addCluster adds the verdicts of the ClusterNetworkPolicies that select
// the attachment to its plan's tiers, in precedence order, and returns
// their names. A rule that cannot be enforced as written is left out when
// it accepts (which only narrows what passes) and, when it denies or
// passes, denies everything instead (the API's "fail closed"); either way
// with a RuleError.
func addCluster(plan *netpol.Plan, pols []*cnpv1beta1.ClusterNetworkPolicy, t Target, res Peers) ([]string, []error) {
	var names []string
	var errs []error
	for _, p := range orderedCluster(pols) {
		ok, err := subjectSelects(p, t)
		if errs = append(errs, err); !ok {
			continue
		}
		names = append(names, p.Name)
		in, out := &plan.Ingress.Baseline, &plan.Egress.Baseline
		if p.Spec.Tier == cnpv1beta1.AdminTier {
			in, out = &plan.Ingress.Admin, &plan.Egress.Admin
		}
		for i, r := range p.Spec.Ingress {
			peers, bad := ingressPeers(r.From)
			rule := clusterRule{p: p, path: fmt.Sprintf("ingress[%d]", i), action: r.Action, peers: peers, bad: bad, protocols: r.Protocols, ingress: true}
			errs = append(errs, addVerdicts(plan, in, rule, t, res))
		}
		for i, r := range p.Spec.Egress {
			peers, bad := egressPeers(r.To)
			rule := clusterRule{p: p, path: fmt.Sprintf("egress[%d]", i), action: r.Action, peers: peers, bad: bad, protocols: r.Protocols}
			errs = append(errs, addVerdicts(plan, out, rule, t, res))
		}
	}
	return names, errs
}

// clusterRule is one rule of a ClusterNetworkPolicy, its peers as
// NetworkPolicy peers (bad: those netclass cannot enforce).
type clusterRule struct {
	p         *cnpv1beta1.ClusterNetworkPolicy
	path      string
	action    cnpv1beta1.ClusterNetworkPolicyRuleAction
	peers     []networkingv1.NetworkPolicyPeer
	bad       []string
	protocols []cnpv1beta1.ClusterNetworkPolicyProtocol
	ingress   bool
}

func (r clusterRule) fail(err error) error {
	return &RuleError{Kind: KindClusterNetworkPolicy, Name: r.p.Name, Path: r.path, Err: err}
}

// addVerdicts appends the rule's verdicts to the tier, within the
// attachment's bounds (limits.go).
func addVerdicts(plan *netpol.Plan, tier *[]netpol.Verdict, r clusterRule, t Target, res Peers) error {
	n := len(*tier)
	vs, err := r.verdicts(t, res)
	*tier = append(*tier, vs...)
	if berr := withinBudget(plan); berr != nil {
		*tier = append((*tier)[:n], r.failClosed()...)
		err = errors.Join(err, r.fail(berr))
	}
	return err
}

// failClosed is what stands for a rule that cannot be enforced: nothing
// for an Accept, a Deny of everything for a Deny or a Pass.
func (r clusterRule) failClosed() []netpol.Verdict {
	if r.action == cnpv1beta1.ClusterNetworkPolicyRuleActionAccept {
		return nil
	}
	return []netpol.Verdict{{Action: netpol.Deny}}
}

// verdicts compiles the rule: a verdict per allow its peers and ports
// compile to (NetworkPolicy's compilation, addRule).
func (r clusterRule) verdicts(t Target, res Peers) ([]netpol.Verdict, error) {
	action, ok := actions[r.action]
	if !ok {
		return r.failClosed(), r.fail(fmt.Errorf("action %q", r.action))
	}
	ports, err := clusterPorts(r.protocols)
	if err == nil {
		err = ruleBounds(r.peers, ports)
	}
	if err == nil && len(r.bad) > 0 {
		err = fmt.Errorf("peers netclass does not enforce: %v", r.bad)
	}
	if err != nil && action != netpol.Accept {
		return r.failClosed(), r.fail(fmt.Errorf("%w: the rule denies everything instead", err))
	}
	var errs []error
	if err != nil {
		if len(r.bad) == 0 {
			return nil, r.fail(err)
		}
		errs = append(errs, r.fail(fmt.Errorf("%w: they match nothing", err)))
	}
	if len(r.peers) == 0 {
		return nil, errors.Join(errs...)
	}
	var d netpol.Direction
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: r.p.Name}}
	if err := addRule(&d, np, r.path, uniquePeers(r.peers), ports, t, res, r.ingress); err != nil {
		stamp(err)
		if action != netpol.Accept {
			return r.failClosed(), errors.Join(err, r.fail(errors.New("the rule denies everything instead")))
		}
		errs = append(errs, err)
	}
	out := make([]netpol.Verdict, 0, len(d.Allow))
	for _, a := range d.Allow {
		out = append(out, netpol.Verdict{Action: action, Match: a})
	}
	return out, errors.Join(errs...)
}

var actions = map[cnpv1beta1.ClusterNetworkPolicyRuleAction]netpol.Action{
	cnpv1beta1.ClusterNetworkPolicyRuleActionAccept: netpol.Accept,
	cnpv1beta1.ClusterNetworkPolicyRuleActionDeny:   netpol.Deny,
	cnpv1beta1.ClusterNetworkPolicyRuleActionPass:   netpol.Pass,
}

func stamp(err error) {
	for _, re := range RuleErrors(err) {
		re.Kind = KindClusterNetworkPolicy
	}
}
