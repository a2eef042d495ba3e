package prepare

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

type fakeClaims map[string]*resourceapi.ResourceClaim

func (f fakeClaims) Claim(_ context.Context, ns, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := f[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, errors.New("not found")
}

// A pod that joins a claim prepared on the node for another pod (the kubelet
// does not prepare it again) is recorded when its sandbox starts; a pod the
// claim is not reserved for, and one naming no claim itself, are not; only
// a pod that may be joining costs an API read.
func TestJoinShared(t *testing.T) {
	h := newHarness(t)
	a, b, c := podNamed("default", "pod-a", "pod-a-uid"), podNamed("default", "pod-b", "pod-b-uid"), podNamed("default", "pod-c", "pod-c-uid")
	for _, p := range []*corev1.Pod{a, b, c} {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "net", ResourceClaimName: ptr.To("c1")}}
	}
	plain := podNamed("default", "plain", "plain-uid")
	plain.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "net", ResourceClaimTemplateName: ptr.To("tmpl")}}
	h.plugin.Pods = fakePods{"default/pod-a": a, "default/pod-b": b, "default/pod-c": c, "default/plain": plain}
	c1 := claim("default", "c1", "uid-1", result("net", "netclass.dev", "blue-dev"))
	if got, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c1}); got["uid-1"].Err != nil {
		t.Fatal(got["uid-1"].Err)
	}
	reserve(c1, a, b) // pod B joins; the kubelet calls no Prepare for it
	h.plugin.Claims = fakeClaims{"default/c1": c1}
	join := func(p *corev1.Pod) error {
		return h.plugin.JoinShared(context.Background(), types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, p.UID)
	}
	for _, p := range []*corev1.Pod{b, c, plain} {
		if err := join(p); err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
	}
	rec, _ := h.store.Get("uid-1")
	if !rec.HasPod(a.UID) || !rec.HasPod(b.UID) || rec.HasPod(c.UID) || len(rec.Pods) != 2 {
		t.Errorf("recorded pods %+v, want pod-a and pod-b", rec.Pods)
	}
	// The API cannot be read: a pod that may be joining fails (it would
	// start without its interface); one already recorded, and one naming
	// only claims the node has not prepared (another driver's), start.
	h.plugin.Claims = fakeClaims{}
	if err := join(c); err == nil {
		t.Error("a claim that cannot be read: no error (the pod would start without its interface)")
	}
	if err := join(b); err != nil {
		t.Errorf("a pod the record names already: %v", err)
	}
	other := podNamed("default", "other", "other-uid")
	other.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu-claim")}}
	h.plugin.Pods = fakePods{"default/other": other}
	if err := join(other); err != nil {
		t.Errorf("a pod naming a claim not prepared on the node: %v (its start would fail during an API outage)", err)
	}
}
