package podnetwork_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/internal/harness"
	"github.com/netclass-dev/netclass/controller/podnetwork"
)

func setup(t *testing.T, kube []runtime.Object, nc ...runtime.Object) (*harness.Env, *podnetwork.Controller) {
	t.Helper()
	env := harness.New(t, kube, nc)
	c, err := podnetwork.New(env.NC, env.NCInf, env.KubeInf, env.Recorder)
	if err != nil {
		t.Fatal(err)
	}
	env.Start(t, c.HasSynced)
	return env, c
}

func get(t *testing.T, env *harness.Env, name string) *multinetworkv1.PodNetwork {
	t.Helper()
	p, err := env.NC.MultinetworkV1().PodNetworks().Get(env.Ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func reconcile(t *testing.T, env *harness.Env, c *podnetwork.Controller, name string) {
	t.Helper()
	if _, err := c.Reconcile(env.Ctx, name); err != nil {
		t.Fatalf("reconcile %s: %v", name, err)
	}
}

func hasEvent(events []string, reason string) bool {
	return slices.ContainsFunc(events, func(e string) bool { return strings.Contains(e, " "+reason+" ") })
}

func TestReconcileSetsFinalizerAndConditions(t *testing.T) {
	env, c := setup(t, nil, pn("blue", true, bridgeParams), pn("bad", true, `{"type":"netclass-bridge","mtu":1}`))
	reconcile(t, env, c, "blue")
	reconcile(t, env, c, "bad")
	blue := get(t, env, "blue")
	if !slices.Contains(blue.Finalizers, podnetwork.Finalizer) {
		t.Errorf("finalizers %v lack %s", blue.Finalizers, podnetwork.Finalizer)
	}
	ready := condition.Get(blue.Status.Conditions, "Ready")
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != 3 {
		t.Errorf("Ready = %+v", ready)
	}
	if inUse := condition.Get(blue.Status.Conditions, "InUse"); inUse == nil || inUse.Status != metav1.ConditionFalse {
		t.Errorf("InUse = %+v", inUse)
	}
	if held := condition.Get(blue.Status.Conditions, "SegmentHeld"); held == nil || held.Status != metav1.ConditionTrue ||
		held.Message != "bridge blue0 belongs to this network" {
		t.Errorf("SegmentHeld = %+v", held)
	}
	badPN := get(t, env, "bad")
	bad := condition.Get(badPN.Status.Conditions, "Ready")
	if bad == nil || bad.Reason != "InvalidParameters" || !strings.Contains(bad.Message, "mtu") {
		t.Errorf("bad Ready = %+v", bad)
	}
	// An invalid PodNetwork holds its segment too (the default bridge).
	if held := condition.Get(badPN.Status.Conditions, "SegmentHeld"); held == nil || held.Status != metav1.ConditionTrue {
		t.Errorf("bad SegmentHeld = %+v", held)
	}
	events := env.Events()
	if !hasEvent(events, "Ready") || !hasEvent(events, "InvalidParameters") {
		t.Errorf("events %v lack Ready and InvalidParameters", events)
	}
}

func TestReconcileLeavesOtherProvidersAlone(t *testing.T) {
	other := pn("foreign", true, `{"whatever":1}`)
	other.Spec.Provider = "example.dra.x-k8s.io/network"
	env, c := setup(t, nil, other)
	reconcile(t, env, c, "foreign")
	reconcile(t, env, c, "missing")
	for _, a := range env.NC.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("unexpected write %s %s", a.GetVerb(), a.GetResource())
		}
	}
	if ev := env.Events(); len(ev) > 0 {
		t.Errorf("events for a foreign PodNetwork: %v", ev)
	}
}

func TestReconcileIsIdempotent(t *testing.T) {
	env, c := setup(t, nil, pn("blue", true, bridgeParams))
	reconcile(t, env, c, "blue")
	lister := env.NCInf.Multinetwork().V1().PodNetworks().Lister()
	env.Resync(t, "blue's status", func() bool {
		p, err := lister.Get("blue")
		return err == nil && condition.Get(p.Status.Conditions, "InUse") != nil
	})
	env.Events()
	before := len(env.NC.Actions())
	reconcile(t, env, c, "blue")
	if after := env.NC.Actions()[before:]; len(after) != 0 {
		t.Errorf("second reconcile wrote: %v", after)
	}
	if ev := env.Events(); len(ev) != 0 {
		t.Errorf("second reconcile emitted %v", ev)
	}
}

func TestDeletionWaitsForClaims(t *testing.T) {
	blue := pn("blue", true, bridgeParams)
	blue.Finalizers = []string{podnetwork.Finalizer}
	now := metav1.NewTime(time.Now())
	blue.DeletionTimestamp = &now
	s := harness.Slice("netclass.dev", "node-a", harness.Device("blue-dev", map[string]string{"resource.kubernetes.io/podNetwork": "blue"}))
	cl := harness.Claim("user", []harness.Result{harness.Alloc("netclass.dev", "node-a", "blue-dev")}, nil)
	env, c := setup(t, []runtime.Object{s, cl}, blue)
	reconcile(t, env, c, "blue")
	got := get(t, env, "blue")
	if !slices.Contains(got.Finalizers, podnetwork.Finalizer) {
		t.Fatal("finalizer removed while a claim uses the network")
	}
	inUse := condition.Get(got.Status.Conditions, "InUse")
	if inUse == nil || inUse.Status != metav1.ConditionTrue || !strings.Contains(inUse.Message, "ns/user") || !strings.Contains(inUse.Message, "deletion waits") {
		t.Errorf("InUse = %+v", inUse)
	}
	if ev := env.Events(); !hasEvent(ev, podnetwork.EventDeletionBlocked) {
		t.Errorf("events %v lack %s", ev, podnetwork.EventDeletionBlocked)
	}

	// The claim is deallocated: the finalizer goes.
	env.Deallocate(t, cl)
	pns := env.NCInf.Multinetwork().V1().PodNetworks().Lister()
	env.Resync(t, "blue in use", func() bool {
		p, err := pns.Get("blue")
		return err == nil && condition.IsTrue(p.Status.Conditions, "InUse")
	})
	reconcile(t, env, c, "blue")
	got = get(t, env, "blue")
	if slices.Contains(got.Finalizers, podnetwork.Finalizer) {
		t.Errorf("finalizer kept after the last claim went: %v", got.Finalizers)
	}
	if ev := env.Events(); !hasEvent(ev, podnetwork.EventFinalizerRemoved) || !hasEvent(ev, "NotInUse") {
		t.Errorf("events %v lack FinalizerRemoved and NotInUse", ev)
	}
}
