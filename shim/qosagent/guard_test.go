package qosagent

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/plugins/podpolicy"
)

// Guard isolates a selected pod's new attachment at once, and the next
// sync finds it already right; a pod no policy selects costs no kernel
// call; a kernel failure fails the attachment.
func TestGuardIsolatesBeforeThePodStarts(t *testing.T) {
	f := newFixture()
	k := fakePolicyKernel{}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "deny",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	kernel := k.sync
	f.agent.NetPol = &NetPolicies{
		List:   func(string) ([]*networkingv1.NetworkPolicy, error) { return []*networkingv1.NetworkPolicy{deny}, nil },
		Kernel: func(items []podpolicy.Interface) []podpolicy.Result { return kernel(items) },
	}
	claim := f.claims.claims[0]
	dev := &claim.Devices[0]
	pod := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: name, UID: "x", Labels: labels}}
	}
	ctx := context.Background()
	if err := f.agent.Guard(ctx, pod("a", f.pods["a"]), claim.UID, dev, dev.Attachments[0]); err != nil {
		t.Fatal(err)
	}
	if p := k["/ns/a/net1"]; p == nil || !p.Ingress.Isolated {
		t.Fatalf("pod a (app=web) after Guard: policy %+v, want ingress isolated", p)
	}
	if err := f.agent.Guard(ctx, pod("b", f.pods["b"]), claim.UID, dev, dev.Attachments[1]); err != nil {
		t.Fatal(err)
	}
	if _, ok := k["/ns/b/net1"]; ok {
		t.Error("Guard touched the kernel for a pod no policy selects")
	}
	clear(k)
	f.agent.Sync(ctx)
	if _, ok := k["/ns/a/net1"]; ok {
		t.Error("the sync after Guard synced pod a's table again")
	}
	if p, ok := k["/ns/b/net1"]; !ok || !p.IsZero() {
		t.Errorf("the sync after Guard did not check that pod b has no table (%+v)", p)
	}
	kernel = func(items []podpolicy.Interface) []podpolicy.Result {
		return []podpolicy.Result{{Err: errors.New("netns gone")}}
	}
	if err := f.agent.Guard(ctx, pod("a", f.pods["a"]), claim.UID, dev, dev.Attachments[0]); err == nil {
		t.Error("Guard succeeded although the kernel failed")
	}
}
