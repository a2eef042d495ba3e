package nad

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func pod(ns, networks string, phase corev1.PodPhase) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", UID: "u", ResourceVersion: "7",
		Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"other": "y"}}}
	if networks != "" {
		p.Annotations[AnnotationNetworks] = networks
	}
	p.Spec.NodeName = "n1"
	p.Status.Phase = phase
	return p
}

func TestPodNADs(t *testing.T) {
	for _, c := range []struct {
		name string
		pod  any
		want []string
	}{
		{"its namespace and another, twice", pod("games", "storage@net1, infra/storage, storage@net2", corev1.PodRunning), []string{"games/storage", "infra/storage"}},
		{"JSON", pod("games", `[{"name":"storage","namespace":"infra"}]`, corev1.PodPending), []string{"infra/storage"}},
		{"ended", pod("games", "storage", corev1.PodSucceeded), nil},
		{"failed", pod("games", "storage", corev1.PodFailed), nil},
		{"none", pod("games", "", corev1.PodRunning), nil},
		{"not a pod", "x", nil},
	} {
		got, err := podNADs(c.pod)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v %v, want %v", c.name, got, err, c.want)
		}
	}
}

func TestCutPod(t *testing.T) {
	got, err := cutPod(pod("games", "storage", corev1.PodRunning))
	p := got.(*corev1.Pod)
	if err != nil || p.Name != "p" || p.Namespace != "games" || p.UID != "u" || p.ResourceVersion != "7" ||
		p.Status.Phase != corev1.PodRunning || len(p.Annotations) != 1 || p.Annotations[AnnotationNetworks] != "games/storage" ||
		p.Labels != nil || p.Spec.NodeName != "" {
		t.Errorf("cut %+v %v", p, err)
	}
	// The cache keeps the NADs named, not what the pod wrote.
	long := `[{"name":"storage","namespace":"infra","interface":"` + strings.Repeat("x", 200_000) + `"}`
	for i := range 1000 {
		long += fmt.Sprintf(`,{"name":"n%d"}`, i)
	}
	long += "]"
	cut, _ := cutPod(pod("games", long, corev1.PodRunning))
	kept := cut.(*corev1.Pod).Annotations[AnnotationNetworks]
	if got, _ := podNADs(cut); len(kept) > 64*20 || len(got) != MaxNames || got[0] != "games/n0" || !slices.Contains(got, "infra/storage") {
		t.Errorf("a long annotation kept as %d bytes, naming %d NADs (%.3v)", len(kept), len(got), got)
	}
	if got, _ := cutPod(pod("games", "", corev1.PodRunning)); got.(*corev1.Pod).Annotations != nil {
		t.Errorf("annotations kept: %v", got.(*corev1.Pod).Annotations)
	}
	marker := cache.DeletedFinalStateUnknown{Key: "games/p"}
	if got, _ := cutPod(marker); got != marker {
		t.Errorf("a deletion marker changed: %v", got)
	}
}

// A pod that stops naming a deleting NAD (gone, ended, annotation edited)
// asks for a sync; any other pod change does not.
func TestPodHandler(t *testing.T) {
	c := &Controller{trigger: make(chan struct{}, 1), deleting: &deletingNADs{}}
	c.deleting.set(map[string]bool{"infra/storage": true, "infra/kept": false})
	h := c.podHandler()
	naming := pod("games", "infra/storage, infra/kept", corev1.PodRunning)
	for _, tc := range []struct {
		name   string
		change func()
		want   bool
	}{
		{"deleted", func() { h.OnDelete(naming) }, true},
		{"deleted, seen late", func() { h.OnDelete(cache.DeletedFinalStateUnknown{Key: "games/p", Obj: naming}) }, true},
		{"ended", func() { h.OnUpdate(naming, pod("games", "infra/storage", corev1.PodSucceeded)) }, true},
		{"annotation edited", func() { h.OnUpdate(naming, pod("games", "infra/kept", corev1.PodRunning)) }, true},
		{"still naming it", func() { h.OnUpdate(naming, naming) }, false},
		{"a NAD not deleting dropped", func() { h.OnUpdate(naming, pod("games", "infra/storage", corev1.PodRunning)) }, false},
		{"another pod deleted", func() { h.OnDelete(pod("games", "infra/kept", corev1.PodRunning)) }, false},
		{"added", func() { h.OnAdd(naming, false) }, false},
	} {
		tc.change()
		if got := syncAsked(c); got != tc.want {
			t.Errorf("%s: sync asked %v, want %v", tc.name, got, tc.want)
		}
	}
}

// syncAsked reports whether a sync was asked for since the last call.
func syncAsked(c *Controller) bool {
	select {
	case <-c.trigger:
		return true
	default:
		return false
	}
}

func TestNamespaceHandler(t *testing.T) {
	c := &Controller{trigger: make(chan struct{}, 1), deleting: &deletingNADs{}}
	c.deleting.set(map[string]bool{"infra/storage": true, "lab/kept": false})
	h := c.namespaceHandler()
	ns := func(name string, phase corev1.NamespacePhase) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NamespaceStatus{Phase: phase}}
	}
	active, terminating := ns("infra", corev1.NamespaceActive), ns("infra", corev1.NamespaceTerminating)
	marked := ns("infra", corev1.NamespaceActive)
	marked.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		name   string
		change func()
		want   bool
	}{
		{"starts terminating", func() { h.OnUpdate(active, terminating) }, true},
		{"deletion marked", func() { h.OnUpdate(active, marked) }, true},
		{"deleted", func() { h.OnDelete(terminating) }, true},
		{"deleted, seen late", func() { h.OnDelete(cache.DeletedFinalStateUnknown{Key: "infra", Obj: terminating}) }, true},
		{"already terminating", func() { h.OnUpdate(terminating, terminating) }, false},
		{"still active", func() { h.OnUpdate(active, active) }, false},
		{"a namespace whose NAD is not deleting", func() { h.OnUpdate(ns("lab", corev1.NamespaceActive), ns("lab", corev1.NamespaceTerminating)) }, false},
		{"a namespace whose name prefixes it", func() { h.OnDelete(ns("inf", corev1.NamespaceTerminating)) }, false},
		{"added", func() { h.OnAdd(terminating, false) }, false},
	} {
		tc.change()
		if got := syncAsked(c); got != tc.want {
			t.Errorf("%s: sync asked %v, want %v", tc.name, got, tc.want)
		}
	}
}
