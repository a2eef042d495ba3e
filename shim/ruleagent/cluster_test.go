package ruleagent

import (
	"context"
	"errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/netpol"
)

// A ClusterNetworkPolicy labelled for netclass applies to every netclass
// attachment of the pods its subject selects (here by their namespace's
// labels), before a new attachment's port opens too; an edit reaches the
// running attachments on the next sync; the outcomes name it; the
// namespace's labels failing to read fails the plan, not open it.
func TestClusterNetworkPoliciesOnEveryAttachment(t *testing.T) {
	f := newFixture()
	withRed(f)
	k := fakePolicyKernel{}
	cnp := &cnpv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-all",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: cnpv1beta1.ClusterNetworkPolicySpec{Tier: cnpv1beta1.AdminTier, Priority: 1,
			Subject: cnpv1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}},
			Ingress: []cnpv1beta1.ClusterNetworkPolicyIngressRule{{Action: cnpv1beta1.ClusterNetworkPolicyRuleActionDeny,
				From: []cnpv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}}}
	nsLabels := map[string]string{"team": "a"}
	var labelsErr error
	f.agent.NetPol = &NetPolicies{Kernel: k.sync, Peers: &netPeers{},
		List: func(string) ([]*networkingv1.NetworkPolicy, error) { return nil, nil },
		Cluster: func() ([]*cnpv1beta1.ClusterNetworkPolicy, error) {
			return []*cnpv1beta1.ClusterNetworkPolicy{cnp}, nil
		},
		NamespaceLabels: func(string) (map[string]string, error) { return nsLabels, labelsErr },
	}
	claim := f.claims.claims[0]
	dev := &claim.Devices[0]
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "a", UID: "a", Labels: f.pods["a"]}}
	ctx := context.Background()
	if err := f.agent.Guard(ctx, pod, claim.UID, dev, dev.Attachments[0]); err != nil {
		t.Fatal(err)
	}
	if got := k["/ns/a/net1"]; got == nil || len(got.Ingress.Admin) != 1 || got.Ingress.Admin[0].Action != netpol.Deny {
		t.Fatalf("after Guard: %+v, want an Admin Deny", got)
	}
	outs := f.agent.Sync(ctx)
	for _, key := range []string{"/ns/a/net1", "/ns/a/net2", "/ns/b/net1", "/ns/b/net2"} {
		if got, ok := k[key]; key != "/ns/a/net1" && (!ok || len(got.Ingress.Admin) != 1) {
			t.Errorf("%s: %+v, want the Admin Deny", key, got)
		}
	}
	for _, o := range outs {
		if !slices.Equal(o.ClusterPolicies, []string{"deny-all"}) {
			t.Errorf("%s/%s names ClusterNetworkPolicies %v, want [deny-all]", o.Pod, o.IfName, o.ClusterPolicies)
		}
	}
	nsLabels = map[string]string{"team": "b"} // the namespace relabelled: no longer the subject
	f.agent.Sync(ctx)
	checkPlans(t, "namespace relabelled", k, map[string]*netpol.Plan{"/ns/a/net1": {}, "/ns/b/net2": {}})
	labelsErr = errors.New("cache not synced")
	if outs := f.agent.Sync(ctx); len(outs) == 0 || outs[0].Err == nil {
		t.Error("a sync whose namespace labels could not be read reported no error")
	}
}
