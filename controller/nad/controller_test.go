package nad_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynfake "k8s.io/client-go/dynamic/fake"

	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/internal/harness"
	"github.com/netclass-dev/netclass/controller/nad"
)

type env struct {
	*harness.Env
	dyn  *dynfake.FakeDynamicClient
	disc *fakediscovery.FakeDiscovery
	c    *nad.Controller
	gen  *nad.Generated
}

func newEnv(t *testing.T, kubeObjs, ncObjs, nads []runtime.Object) *env {
	t.Helper()
	e := harness.New(t, kubeObjs, ncObjs)
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{nad.GVR: "NetworkAttachmentDefinitionList"})
	for _, u := range nads {
		u := u.(*unstructured.Unstructured)
		if _, err := dyn.Resource(nad.GVR).Namespace(u.GetNamespace()).Create(e.Ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	disc := e.Kube.Discovery().(*fakediscovery.FakeDiscovery)
	gen := nad.NewGenerated()
	c, err := nad.New(dyn, disc, e.KubeInf, e.NCInf, e.Recorder, gen)
	if err != nil {
		t.Fatal(err)
	}
	e.Start(t, c.HasSynced)
	return &env{Env: e, dyn: dyn, disc: disc, c: c, gen: gen}
}

func (e *env) serve() {
	e.disc.Resources = []*metav1.APIResourceList{{GroupVersion: "k8s.cni.cncf.io/v1",
		APIResources: []metav1.APIResource{{Name: "network-attachment-definitions", Namespaced: true, Kind: "NetworkAttachmentDefinition"}}}}
}

func (e *env) sync(t *testing.T) {
	t.Helper()
	if err := e.c.Sync(e.Ctx); err != nil {
		t.Fatal(err)
	}
}

func (e *env) nads(t *testing.T) []string {
	t.Helper()
	list, err := e.dyn.Resource(nad.GVR).Namespace("").List(e.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range list.Items {
		s := u.GetNamespace() + "/" + u.GetName()
		if u.GetDeletionTimestamp() != nil {
			s += "(deleting)"
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

func readyNetwork(ns, name string) *netclassv1alpha1.Network {
	n := &netclassv1alpha1.Network{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: "u1", Labels: map[string]string{"name": "ovn-storage"}}}
	n.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	return n
}

func handWritten(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(nad.GVK)
	u.SetNamespace(ns)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, `{"type":"netclass-bridge"}`, "spec", "config")
	return u
}

// Without the CRD nothing happens and nothing fails; once it is served the
// Ready Network and the PodNetwork's listed namespaces get their NADs, a
// hand-written NAD of the same name is left alone with an Event, and the
// NADs go when their networks stop calling for them.
func TestSync(t *testing.T) {
	pn := &multinetworkv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "storage", Annotations: map[string]string{nad.AnnotationNamespaces: "infra,games"}}}
	pn.Spec.Provider = "netclass.dev"
	pn.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	e := newEnv(t, nil, []runtime.Object{readyNetwork("blue", "vx"), readyNetwork("blue", "taken"), pn},
		[]runtime.Object{handWritten("blue", "taken")})
	e.sync(t)
	if got := e.nads(t); !slices.Equal(got, []string{"blue/taken"}) {
		t.Fatalf("without the CRD: NADs %v", got)
	}
	if got, known := e.gen.Of("blue/vx"); !known || len(got) != 0 {
		t.Errorf("without the CRD, blue/vx's generated NADs: %v (known %v), want none, known", got, known)
	}
	e.serve()
	e.sync(t)
	if got := e.nads(t); !slices.Equal(got, []string{"blue/taken", "blue/vx", "games/storage", "infra/storage"}) {
		t.Fatalf("NADs %v", got)
	}
	e.sync(t) // the generated NADs as a sync finds them (the one before made them)
	for network, want := range map[string][]string{"blue/vx": {"blue/vx"}, "storage": {"games/storage", "infra/storage"}, "blue/taken": nil} {
		if got, _ := e.gen.Of(network); !slices.Equal(got, want) {
			t.Errorf("generated NADs of %s: %v, want %v", network, got, want)
		}
	}
	vx, err := e.dyn.Resource(nad.GVR).Namespace("blue").Get(e.Ctx, "vx", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _, _ := unstructured.NestedString(vx.Object, "spec", "config")
	if !strings.Contains(cfg, `"network":"blue/vx"`) || vx.GetLabels()["name"] != "ovn-storage" || len(vx.GetOwnerReferences()) != 1 {
		t.Errorf("blue/vx: %v", vx.Object)
	}
	taken, _ := e.dyn.Resource(nad.GVR).Namespace("blue").Get(e.Ctx, "taken", metav1.GetOptions{})
	if c, _, _ := unstructured.NestedString(taken.Object, "spec", "config"); c != `{"type":"netclass-bridge"}` || nad.Owned(taken) {
		t.Errorf("the hand-written NAD was touched: %v", taken.Object)
	}
	if !slices.ContainsFunc(e.Events(), func(ev string) bool { return strings.Contains(ev, nad.EventNotOwned) }) {
		t.Error("no Event on the Network whose NAD name is taken")
	}

	// A pod still names infra/storage: narrowing the PodNetwork deletes it,
	// but its finalizer holds it until the pod is gone.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "p", Annotations: map[string]string{nad.AnnotationNetworks: "storage@net1"}}}
	if _, err := e.Kube.CoreV1().Pods("infra").Create(e.Ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pn = pn.DeepCopy()
	pn.Annotations[nad.AnnotationNamespaces] = "games"
	if _, err := e.NC.MultinetworkV1().PodNetworks().Update(e.Ctx, pn, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Resync(t, "the update", func() bool {
		p, _ := e.NCInf.Multinetwork().V1().PodNetworks().Lister().Get("storage")
		return p.Annotations[nad.AnnotationNamespaces] == "games"
	})
	e.sync(t)
	if got := e.nads(t); slices.Contains(got, "infra/storage") {
		t.Errorf("infra/storage still there (the fake deletes at once, finalizers aside): %v", got)
	}
	if err := e.NC.NetclassV1alpha1().Networks("blue").Delete(e.Ctx, "vx", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Resync(t, "the update", func() bool {
		_, err := e.NCInf.Netclass().V1alpha1().Networks().Lister().Networks("blue").Get("vx")
		return err != nil
	})
	e.sync(t)
	if got := e.nads(t); !slices.Equal(got, []string{"blue/taken", "games/storage"}) {
		t.Errorf("after the Network went: NADs %v", got)
	}
	e.sync(t)
	if got, _ := e.gen.Of("blue/vx"); len(got) != 0 {
		t.Errorf("generated NADs of the gone Network: %v", got)
	}
}

// A deleting generated NAD of a PodNetwork is held while a pod of any
// namespace names it (Multus lets a pod name a NAD of another namespace),
// and released by the first sync after that pod went (which asks for it:
// TestPodHandler). A pod of another namespace holds neither a Network's NAD
// (netclass-nad refuses it) nor one whose namespace is being deleted.
func TestDeletingNADHeldByAPodOfAnotherNamespace(t *testing.T) {
	pn := &multinetworkv1.PodNetwork{ObjectMeta: metav1.ObjectMeta{Name: "storage", Annotations: map[string]string{nad.AnnotationNamespaces: "infra,gone"}}}
	pn.Spec.Provider = "netclass.dev"
	pn.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	deleting := func(ns, name, network string) *unstructured.Unstructured {
		u := nad.Object(nad.Desired{Namespace: ns, Name: name, Network: network, Labels: map[string]string{nad.LabelManagedBy: nad.ManagedBy}})
		u.SetDeletionTimestamp(&metav1.Time{Time: time.Now()}) // deleted by hand
		return u
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "games", Name: "p",
		Annotations: map[string]string{nad.AnnotationNetworks: "infra/storage@net1, infra/vx@net2, gone/storage@net3"}}}
	infra := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}}
	gone := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gone", DeletionTimestamp: &metav1.Time{Time: time.Now()}}}
	gone.Status.Phase = corev1.NamespaceTerminating
	e := newEnv(t, []runtime.Object{pod, infra, gone}, []runtime.Object{pn, readyNetwork("infra", "vx")},
		[]runtime.Object{deleting("infra", "storage", "storage"), deleting("infra", "vx", "infra/vx"), deleting("gone", "storage", "storage")})
	e.serve()
	e.sync(t)
	for _, c := range []struct {
		ns, name string
		held     bool
	}{{"infra", "storage", true}, {"infra", "vx", false}, {"gone", "storage", false}} {
		if f := e.finalizers(t, c.ns, c.name); len(f) > 0 != c.held {
			t.Errorf("%s/%s: finalizers %v while pod games/p names it, want it held: %v", c.ns, c.name, f, c.held)
		}
	}
	if err := e.Kube.CoreV1().Pods("games").Delete(e.Ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Resync(t, "the pod gone", func() bool {
		_, err := e.KubeInf.Core().V1().Pods().Lister().Pods("games").Get("p")
		return err != nil
	})
	e.sync(t)
	if f := e.finalizers(t, "infra", "storage"); len(f) != 0 {
		t.Errorf("finalizers %v after the last pod naming the NAD went", f)
	}
}

func (e *env) finalizers(t *testing.T, ns, name string) []string {
	t.Helper()
	u, err := e.dyn.Resource(nad.GVR).Namespace(ns).Get(e.Ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetFinalizers()
}
