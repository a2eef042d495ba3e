package ruleagent

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/plugins/podpolicy"
)

// Guard isolates a selected pod's new attachment at once, and the next
// sync finds it already right; a pod no policy selects gets its (empty)
// policy too, which opens its port, as a port that holds none (the node's
// policies not read); a kernel failure fails the attachment.
func TestGuardIsolatesBeforeThePodStarts(t *testing.T) {
	f := newFixture()
	k := fakePolicyKernel{}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "deny",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	held := map[string]*netpol.Plan{}
	kernel := func(items []podpolicy.Interface) []podpolicy.Result {
		for _, it := range items {
			held[it.PodNS] = it.Prev
		}
		return k.sync(items)
	}
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
	if p, ok := k["/ns/b/net1"]; !ok || !p.IsZero() {
		t.Errorf("Guard left pod b's port as ADD left it (closed): policy %+v, want an empty one applied", p)
	}
	if a, b := held["/ns/a"], held["/ns/b"]; a != nil || b == nil || !b.IsZero() {
		t.Errorf("what the new ports hold, as Guard told the kernel: a %+v (want unknown: read back), b %+v (want none)", a, b)
	}
	clear(k)
	f.agent.Sync(ctx)
	if len(k) != 0 {
		t.Errorf("the sync after Guard synced again: %v", k)
	}
	kernel = func(items []podpolicy.Interface) []podpolicy.Result {
		return []podpolicy.Result{{Err: errors.New("netns gone")}}
	}
	if err := f.agent.Guard(ctx, pod("a", f.pods["a"]), claim.UID, dev, dev.Attachments[0]); err == nil {
		t.Error("Guard succeeded although the kernel failed")
	}
}

// Guard gives up when the NRI budget ends, the kernel call still running,
// and the attachment fails; it also guards an attachment whose network is
// no longer offered (the pod's port would stay closed otherwise).
func TestGuardHonoursItsDeadlineAndUnofferedNetworks(t *testing.T) {
	f := newFixture()
	release := make(chan struct{})
	defer close(release)
	var synced []podpolicy.Interface
	f.agent.NetPol = &NetPolicies{
		List: func(string) ([]*networkingv1.NetworkPolicy, error) { return nil, nil },
		Kernel: func(items []podpolicy.Interface) []podpolicy.Result {
			if items[0].PodNS == "/ns/a" {
				<-release
			}
			synced = append(synced, items...)
			return make([]podpolicy.Result, len(items))
		},
	}
	claim := f.claims.claims[0]
	dev := &claim.Devices[0]
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "a", UID: "a"}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := f.agent.Guard(ctx, pod, claim.UID, dev, dev.Attachments[0]); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Guard with a stuck kernel: %v, want the deadline's error", err)
	}
	delete(f.networks, dev.Device) // withdrawn
	pod.Name, pod.UID = "b", "b"
	if err := f.agent.Guard(context.Background(), pod, claim.UID, dev, dev.Attachments[1]); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 1 || synced[0].PodNS != "/ns/b" {
		t.Errorf("the attachment of a withdrawn network got no policy: %v", synced)
	}
}

// A Guard that gave up at its deadline leaves its kernel call running;
// SettleGuards waits for it (for that sandbox's calls only, and no longer
// than its context), so the failed attachment's DEL (the rollback calls it
// first) removes what the call wrote rather than running before it.
func TestSettleGuardsWaitsForAbandonedCalls(t *testing.T) {
	f := newFixture()
	entered, release := make(chan struct{}), make(chan struct{})
	finished := false
	f.agent.NetPol = &NetPolicies{
		List: func(string) ([]*networkingv1.NetworkPolicy, error) { return nil, nil },
		Kernel: func(items []podpolicy.Interface) []podpolicy.Result {
			close(entered)
			<-release
			finished = true
			return make([]podpolicy.Result, len(items))
		},
	}
	claim := f.claims.claims[0]
	dev := &claim.Devices[0]
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "a", UID: "a"}}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-entered
		cancel() // the NRI budget ends while the kernel call runs
	}()
	if err := f.agent.Guard(ctx, pod, claim.UID, dev, dev.Attachments[0]); !errors.Is(err, context.Canceled) {
		t.Fatalf("Guard whose budget ended: %v, want the context's error", err)
	}
	expired, cancelSettle := context.WithCancel(context.Background())
	cancelSettle()
	if err := f.agent.SettleGuards(expired, dev.Attachments[0].SandboxID); err == nil {
		t.Fatal("SettleGuards did not wait for the kernel call Guard gave up on")
	}
	if err := f.agent.SettleGuards(expired, "another-sandbox"); err != nil {
		t.Fatalf("SettleGuards waited for another sandbox's call: %v", err)
	}
	close(release)
	if err := f.agent.SettleGuards(context.Background(), dev.Attachments[0].SandboxID); err != nil {
		t.Fatal(err)
	}
	if !finished {
		t.Fatal("SettleGuards returned before the kernel call ended")
	}
}
