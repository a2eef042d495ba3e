package bench

import (
	"encoding/json"
	"testing"

	mnpv1beta1 "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/apis/k8s.cni.cncf.io/v1beta1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/ruleagent"
)

// BenchmarkMultiNetworkPolicyEdit100Pods50Policies is
// BenchmarkNetworkPolicyEdit100Pods50Policies with the 50 policies written
// as MultiNetworkPolicies whose policy-for names the node's network (the
// same specs, through JSON): the agent converts and compiles them at
// every sync. The tables are checked against the plans of the labelled
// policies they were written from.
func BenchmarkMultiNetworkPolicyEdit100Pods50Policies(b *testing.B) {
	benchPolicyEdit(b, multiKind)
}

var multiKind = policyKind{
	name: "MultiNetworkPolicy",
	setUp: func(b testing.TB, np *ruleagent.NetPolicies, src *polSources) {
		multi := make([]*mnpv1beta1.MultiNetworkPolicy, len(src.pols))
		for i, p := range src.pols {
			m := &mnpv1beta1.MultiNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name,
				Annotations: map[string]string{contract.AnnotationPolicyFor: benchNet.Name}}}
			raw, err := json.Marshal(p.Spec)
			if err == nil {
				err = json.Unmarshal(raw, &m.Spec)
			}
			if err != nil {
				b.Fatal(err)
			}
			multi[i] = m
		}
		src.multi = multi
		np.List = func(string) ([]*networkingv1.NetworkPolicy, error) { return nil, nil }
		np.Multi = src.listMulti
	},
	edit: func(src *polSources, k int) {
		editPort(src.pols[k]) // the oracle's copy
		src.multi[k].Spec.Ingress[0].Ports[0].Port = ptr(*src.pols[k].Spec.Ingress[0].Ports[0].Port)
	},
	named: func(o ruleagent.Outcome) []string { return o.MultiPolicies },
}

func (s *polSources) listMulti(ns string) ([]*mnpv1beta1.MultiNetworkPolicy, error) {
	if ns != polNamespace {
		return nil, nil
	}
	return s.multi, nil
}
