package networkqos

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/qos"
)

// anywhere stands in for a destination given by pod/namespace selectors when the rules are
// checked as the plugins' qos block (netclass-dra resolves selectors to addresses), so the
// indices of the other destinations stay those of the spec.
const anywhere = "0.0.0.0/0"

// Validate reports every problem of a NetworkQoS the schema cannot see: label selectors
// (operators and values), and the rules as the plugins' qos block would take them (CIDRs,
// exceptions, families, the meter's limits), each with its field path.
func Validate(q *netclassv1alpha1.NetworkQoS) error {
	var errs field.Errors
	errs.Append(selector("spec.podSelector", &q.Spec.PodSelector))
	for i, ns := range q.Spec.NetworkSelectors {
		p := field.Path("spec.networkSelectors").Index(i)
		errs.Append(selector(p.Child("podNetworkSelector"), ns.PodNetworkSelector))
		errs.Append(selector(p.Child("networkSelector"), ns.NetworkSelector))
		if nad := ns.NetworkAttachmentDefinitionSelector; nad != nil {
			q := p.Child("networkAttachmentDefinitionSelector")
			errs.Append(selector(q.Child("namespaceSelector"), &nad.NamespaceSelector))
			errs.Append(selector(q.Child("networkSelector"), &nad.NetworkSelector))
		}
	}
	spec := qos.Spec{}
	for i, r := range q.Spec.Egress {
		spec.Egress = append(spec.Egress, rule(q.Spec.Priority, i, r))
		if r.Classifier == nil {
			continue
		}
		for j, d := range r.Classifier.To {
			p := field.Path("spec.egress").Index(i).Child("classifier.to").Index(j)
			errs.Append(selector(p.Child("podSelector"), d.PodSelector))
			errs.Append(selector(p.Child("namespaceSelector"), d.NamespaceSelector))
		}
	}
	errs.Append(spec.Validate("spec"))
	return errs.Err()
}

func selector(p field.Path, s *metav1.LabelSelector) error {
	if s == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		return field.Invalid(p, "%v", err)
	}
	return nil
}

// Precedence is the effective precedence of rule index of an object of priority
// (OKEP-4380: priority*20 + index, the later rule winning within an object).
func Precedence(priority int32, index int) int {
	return int(priority)*netclassv1alpha1.MaxNetworkQoSRules + index
}

// rule converts one NetworkQoS rule into the plugins' form.
func rule(priority int32, index int, r netclassv1alpha1.Rule) qos.Rule {
	dscp := int(r.DSCP)
	out := qos.Rule{Priority: Precedence(priority, index), DSCP: &dscp}
	// bandwidth: {} asks for no limit, as the nodes take it (shim/render);
	// a burst without a rate (which the schema refuses) is reported.
	if b := r.Bandwidth; b != nil && (b.Rate != nil || b.Burst != nil) {
		out.Bandwidth = &qos.Bandwidth{}
		if b.Rate != nil {
			out.Bandwidth.Rate = *b.Rate
		}
		if b.Burst != nil {
			out.Bandwidth.Burst = *b.Burst
		}
	}
	if r.Classifier == nil {
		return out
	}
	for _, d := range r.Classifier.To {
		peer := qos.Peer{IPBlock: &qos.IPBlock{CIDR: anywhere}}
		if d.IPBlock != nil {
			peer.IPBlock = &qos.IPBlock{CIDR: string(d.IPBlock.CIDR)}
			for _, e := range d.IPBlock.Except {
				peer.IPBlock.Except = append(peer.IPBlock.Except, string(e))
			}
		}
		out.Classifier.To = append(out.Classifier.To, peer)
	}
	for _, p := range r.Classifier.Ports {
		port := qos.Port{Protocol: string(p.Protocol)}
		if p.Port != nil {
			v := int(*p.Port)
			port.Port = &v
		}
		out.Classifier.Ports = append(out.Classifier.Ports, port)
	}
	return out
}

// describe is the human summary of what a valid NetworkQoS selects.
func describe(q *netclassv1alpha1.NetworkQoS, podNetworks, networks int) string {
	if len(q.Spec.NetworkSelectors) == 0 {
		return "valid; selects the default network (the pods' primary interface): no networkSelectors"
	}
	primary, nads := "", ""
	for _, s := range q.Spec.NetworkSelectors {
		switch s.NetworkSelectionType {
		case netclassv1alpha1.DefaultNetwork:
			primary = "the default network (the pods' primary interface), "
		case netclassv1alpha1.NetworkAttachmentDefinitions:
			nads = ", and the attachments made through the NetworkAttachmentDefinitions its selector selects"
		}
	}
	return fmt.Sprintf("valid; selects %s%d PodNetwork(s) and %d Network(s) of its namespace%s (its networkSelectors)", primary, podNetworks, networks, nads)
}
