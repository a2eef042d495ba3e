package bench

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/ruleagent"
)

// BenchmarkClusterNetworkPolicyEdit100Pods50Multi10Cluster is
// BenchmarkMultiNetworkPolicyEdit100Pods50Policies with 10
// ClusterNetworkPolicies labelled for netclass besides the 50
// MultiNetworkPolicies (5 Admin, 5 Baseline; subjects by namespace or by
// pod labels, peers by pod labels, Accept, Deny and Pass, TCP and UDP
// ports): every pod holds Admin verdicts, the namespaced allows and (when
// no namespaced policy isolates it) Baseline verdicts, compiled at every
// sync. Each iteration edits a MultiNetworkPolicy as there; the tables are
// checked against netpolicy.CompileAll of the labelled policies and the
// ClusterNetworkPolicies.
func BenchmarkClusterNetworkPolicyEdit100Pods50Multi10Cluster(b *testing.B) {
	benchPolicyEdit(b, policyKind{
		name: "MultiNetworkPolicy (with 10 ClusterNetworkPolicies)",
		setUp: func(tb testing.TB, np *ruleagent.NetPolicies, src *polSources) {
			multiKind.setUp(tb, np, src)
			src.cluster = benchCluster()
			np.Cluster = func() ([]*cnpv1beta1.ClusterNetworkPolicy, error) { return src.cluster, nil }
			np.NamespaceLabels = func(string) (map[string]string, error) { return benchNamespaceLabels, nil }
		},
		edit:  multiKind.edit,
		named: multiKind.named,
	})
}

// benchNamespaceLabels are the benchmark namespace's labels.
var benchNamespaceLabels = map[string]string{"kubernetes.io/metadata.name": polNamespace}

// benchCluster is the 10 ClusterNetworkPolicies.
func benchCluster() []*cnpv1beta1.ClusterNetworkPolicy {
	ns := metav1.LabelSelector{MatchLabels: benchNamespaceLabels}
	pods := func(k, v string) *cnpv1beta1.NamespacedPod {
		return &cnpv1beta1.NamespacedPod{NamespaceSelector: ns, PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{k: v}}}
	}
	tcp := func(p int32) cnpv1beta1.ClusterNetworkPolicyProtocol {
		return cnpv1beta1.ClusterNetworkPolicyProtocol{TCP: &cnpv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1beta1.Port{Number: p}}}
	}
	udp := cnpv1beta1.ClusterNetworkPolicyProtocol{UDP: &cnpv1beta1.ClusterNetworkPolicyProtocolUDP{
		DestinationPort: &cnpv1beta1.Port{Range: &cnpv1beta1.PortRange{Start: 1, End: 65535}}}}
	actions := []cnpv1beta1.ClusterNetworkPolicyRuleAction{cnpv1beta1.ClusterNetworkPolicyRuleActionDeny,
		cnpv1beta1.ClusterNetworkPolicyRuleActionPass, cnpv1beta1.ClusterNetworkPolicyRuleActionAccept}
	var out []*cnpv1beta1.ClusterNetworkPolicy
	for k := range 10 {
		tier, subject := cnpv1beta1.AdminTier, cnpv1beta1.ClusterNetworkPolicySubject{Pods: pods("tier", polTiers[k%5])}
		if k >= 5 {
			tier, subject = cnpv1beta1.BaselineTier, cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: &ns}
		}
		from := []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{Pods: pods("app", polApps[k%3])}}
		out = append(out, &cnpv1beta1.ClusterNetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cluster-%d", k), Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
			Spec: cnpv1beta1.ClusterNetworkPolicySpec{Tier: tier, Priority: int32(k), Subject: subject,
				Ingress: []cnpv1beta1.ClusterNetworkPolicyIngressRule{
					{Action: actions[k%3], From: from, Protocols: []cnpv1beta1.ClusterNetworkPolicyProtocol{tcp(int32(7000 + k)), udp}},
					{Action: actions[(k+1)%3], From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: &ns}}, Protocols: []cnpv1beta1.ClusterNetworkPolicyProtocol{tcp(int32(7100 + k))}},
				},
				Egress: []cnpv1beta1.ClusterNetworkPolicyEgressRule{{Action: actions[(k+2)%3],
					To: []cnpv1beta1.ClusterNetworkPolicyEgressPeer{{Pods: pods("app", polApps[(k+1)%3])}}}},
			},
		})
	}
	return out
}
