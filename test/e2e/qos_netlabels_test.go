//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// A NetworkQoS that selects networks by label follows a running network's
// labels: once the PodNetwork is labelled, its pods get the rules, and once
// the label goes, they lose them, each within liveTimeout (the agent's
// periodic resync is minutes away: the change itself must trigger it). Its
// pod runs on node 1, whose kernel state the test reads.
func TestNetworkQoSFollowsNetworkLabels(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "e2e"+harness.Unique(6), "e2e-netlabel-"+harness.Unique(6)
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, harness.RandomSubnet()), nil, bridge)
	ns := testbed.Namespace(t, e.Kube)
	e.WaitDevice(t, class, "", pn, true)
	e.ClaimTemplate(t, ns, "net", class, "", pn, nil)
	e.RunPods(t, harness.PodOn(e.Node, ns, "p", "net"))
	e.Attached(t, ns, "p", "net", "net1")
	at := e.Attachment(t, getPod(t, e, ns, "p").UID, "net1")
	obj := &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gold"},
		Spec: ncv1.NetworkQoSSpec{
			NetworkSelectors: ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.PodNetworks,
				PodNetworkSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "gold"}}}},
			Egress: []ncv1.Rule{{DSCP: 34}},
		}}
	if _, err := e.NC.NetclassV1alpha1().NetworkQoSes(ns).Create(testbed.Context(t, time.Minute), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hasRules := func(what string, want bool) {
		t.Helper()
		testbed.Poll(t, testbed.Context(t, liveTimeout), 250*time.Millisecond, what,
			func(context.Context) (bool, string, error) {
				ctx := testbed.Context(t, time.Minute) // its own: the last attempt reports the mismatch
				if err := rulesMatchObjects(ctx, e, ns, pn); err != nil {
					return false, err.Error(), nil
				}
				has, err := portHasRules(at.NetNS, at.IfName)
				return err == nil && has == want, fmt.Sprintf("rules present: %v (%v)", has, err), nil
			})
	}
	hasRules("no rules while the network is not labelled", false)
	label := func(value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"labels":{"tier":%s}}}`, value)
		if _, err := e.NC.MultinetworkV1().PodNetworks().Patch(testbed.Context(t, time.Minute), pn, types.MergePatchType,
			[]byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatalf("label PodNetwork %s: %v", pn, err)
		}
	}
	label(`"gold"`)
	hasRules("the rules of the labelled network", true)
	label("null")
	hasRules("no rules once the label is gone", false)
}

// portHasRules reports whether the host port of a pod interface has QoS rules.
func portHasRules(podNS, ifName string) (bool, error) {
	host, err := qosport.HostEnd(podNS, ifName)
	if err != nil {
		return false, err
	}
	c, err := nft.OpenCurrent()
	if err != nil {
		return false, err
	}
	return nft.HasPortQoS(c, host)
}
