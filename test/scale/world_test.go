//go:build scale

package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// world is the churn's namespace: its two claim templates ("local", a
// bridge PodNetwork on every node; "vx", a VXLAN Network across the
// nodes), a NetworkQoS and a NetworkPolicy selecting its pods (app=churn).
type world struct {
	e    *harness.Env
	ns   string
	kube kubernetes.Interface
}

var churnLabels = map[string]string{"app": "churn"}

func newWorld(t *testing.T, e *harness.Env) *world {
	t.Helper()
	cluster := e.AutoVXLANCluster(t) // before the namespace: deleted after its pods
	bn := e.BridgeNet(t, "churn", "local")
	class := e.Class(t, harness.NetworkKind)
	// A /16: each node's block is 256 addresses (a /24 gives 16, fewer than
	// a wave's pods on a node).
	e.Network(t, bn.Namespace, "vx", cluster, harness.RandomVNI(), fmt.Sprintf("10.%d.0.0/16", 160+rand.IntN(40)))
	for _, n := range e.Nodes {
		e.WaitDeviceOn(t, n.Name, class, bn.Namespace, "vx", true)
	}
	e.ClaimTemplate(t, bn.Namespace, "vx", class, bn.Namespace, "vx", nil)
	rc := rest.CopyConfig(e.Rest)
	rc.QPS, rc.Burst = 200, 400 // the waves' bulk writes; the harness's limit would pace them
	rc.Timeout = 0              // a wave's watch lasts minutes: the harness's request timeout would end it
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	w := &world{e: e, ns: bn.Namespace, kube: kube}
	w.policies(t)
	return w
}

// policies writes the NetworkQoS (DSCP 10 for everything, 18 to the
// churn's pods: a peer set that changes with every pod) and the labelled
// NetworkPolicy (ingress from the churn's pods only).
func (w *world) policies(t *testing.T) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	pods := &metav1.LabelSelector{MatchLabels: churnLabels}
	q := &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "churn"},
		Spec: ncv1.NetworkQoSSpec{PodSelector: *pods, Priority: 1,
			NetworkSelectors: ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.PodNetworks, PodNetworkSelector: &metav1.LabelSelector{}},
				{NetworkSelectionType: ncv1.Networks, NetworkSelector: &metav1.LabelSelector{}}},
			Egress: []ncv1.Rule{{DSCP: 10}, {DSCP: 18, Classifier: &ncv1.Classifier{To: []ncv1.Destination{{PodSelector: pods}}}}}}}
	if _, err := w.e.NC.NetclassV1alpha1().NetworkQoSes(w.ns).Create(ctx, q, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkQoS: %v", err)
	}
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: "churn",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *pods,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: pods}}}}}}
	if _, err := w.e.Kube.NetworkingV1().NetworkPolicies(w.ns).Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkPolicy: %v", err)
	}
}

// wave creates n pods spread over the nodes, records when each is Ready
// (a pod that fails or is not Ready within harness.PodTimeout counts as
// failed), then deletes them all and waits until they are gone.
func (w *world) wave(t *testing.T, index, n int) waveResult {
	t.Helper()
	label := fmt.Sprintf("wave-%d", index)
	ctx := ctxFor(t, harness.PodTimeout)
	seen := make(chan outcomes, 1)
	go func() { seen <- w.follow(ctx, label, n) }()
	created := w.create(t, index, n, label)
	r := waveResult{index: index}
	got := <-seen
	for name, at := range created {
		if ready, ok := got.ready[name]; ok && !got.failed[name] {
			r.starts = append(r.starts, ready.Sub(at))
		} else {
			r.failed++
		}
	}
	if r.failed > 0 {
		t.Errorf("wave %d: %d of %d pods not Ready within %v: %s", index, r.failed, n, harness.PodTimeout, w.why(label))
	}
	ctx = ctxFor(t, 5*time.Minute)
	start := time.Now()
	w.each(n, func(i int) {
		grace := int64(1)
		if err := w.kube.CoreV1().Pods(w.ns).Delete(ctx, podName(index, i), metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete pod %s: %v", podName(index, i), err)
		}
	})
	testbed.Poll(t, ctx, 250*time.Millisecond, "wave "+label+" gone", func(ctx context.Context) (bool, string, error) {
		l, err := w.kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: "wave=" + label})
		if err != nil {
			return false, "", err
		}
		return len(l.Items) == 0, fmt.Sprintf("%d pods left", len(l.Items)), nil
	})
	r.deleted = time.Since(start)
	return r
}

// create makes the wave's pods, eight writers at once, and returns when
// each was created.
func (w *world) create(t *testing.T, index, n int, label string) map[string]time.Time {
	t.Helper()
	created := make(map[string]time.Time, n)
	var mu sync.Mutex
	w.each(n, func(i int) {
		p := harness.PodOn(w.e.Nodes[i%len(w.e.Nodes)].Name, w.ns, podName(index, i), "local", "vx")
		p.Labels = map[string]string{"app": "churn", "wave": label}
		at := time.Now()
		if _, err := w.kube.CoreV1().Pods(w.ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Errorf("create pod %s: %v", p.Name, err)
			return
		}
		mu.Lock()
		created[p.Name] = at
		mu.Unlock()
	})
	return created
}

// each runs f for 0..n-1, eight at once.
func (w *world) each(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// outcomes are when each pod of a wave was first seen Ready, and which
// failed.
type outcomes struct {
	ready  map[string]time.Time
	failed map[string]bool
}

// follow lists the wave's pods every 250 ms (a watch can end early on a
// loaded API server) until n pods are Ready or failed, or ctx ends.
func (w *world) follow(ctx context.Context, label string, n int) outcomes {
	o := outcomes{ready: map[string]time.Time{}, failed: map[string]bool{}}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for len(o.ready)+len(o.failed) < n {
		select {
		case <-ctx.Done():
			return o
		case <-tick.C:
		}
		l, err := w.kube.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: "wave=" + label})
		if err != nil {
			continue // the next tick asks again
		}
		now := time.Now()
		for i := range l.Items {
			p := &l.Items[i]
			switch {
			case o.failed[p.Name] || !o.ready[p.Name].IsZero():
			case p.Status.Phase == corev1.PodFailed:
				o.failed[p.Name] = true
			case ready(p):
				o.ready[p.Name] = now
			}
		}
	}
	return o
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// why sums up the wave's pods that are not Ready: how many in each phase,
// with the reason of their scheduling condition or first waiting
// container.
func (w *world) why(label string) string {
	l, err := w.kube.CoreV1().Pods(w.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "wave=" + label})
	if err != nil {
		return err.Error()
	}
	count := map[string]int{}
	for _, p := range l.Items {
		if ready(&p) {
			continue
		}
		reason := ""
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				reason = c.Reason + ": " + c.Message
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil && reason == "" {
				reason = cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
			}
		}
		count[string(p.Status.Phase)+" "+reason]++
	}
	return fmt.Sprint(count)
}
