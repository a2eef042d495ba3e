package networkclass_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/internal/harness"
	"github.com/netclass-dev/netclass/controller/networkclass"
)

func served() *fakediscovery.FakeDiscovery {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	d.Resources = []*metav1.APIResourceList{
		{GroupVersion: "multinetwork.networking.k8s.io/v1", APIResources: []metav1.APIResource{
			{Name: "podnetworks", Kind: "PodNetwork"}, {Name: "podnetworks/status", Kind: "PodNetwork"},
			{Name: "networkclasses", Kind: "NetworkClass"},
		}},
		{GroupVersion: "netclass.dev/v1alpha1", APIResources: []metav1.APIResource{{Name: "networks", Kind: "Network"}, {Name: "networkqoses", Kind: "NetworkQoS"}}},
		{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap"}}},
	}
	return d
}

func TestAccepted(t *testing.T) {
	for _, tc := range []struct {
		gvk    schema.GroupVersionKind
		status metav1.ConditionStatus
		reason string
		msgHas string
	}{
		{schema.GroupVersionKind{Group: "multinetwork.networking.k8s.io", Version: "v1", Kind: "PodNetwork"}, metav1.ConditionTrue, "Accepted", `"podnetworks"`},
		{schema.GroupVersionKind{Group: "netclass.dev", Version: "v1alpha1", Kind: "Network"}, metav1.ConditionTrue, "Accepted", `"networks"`},
		{schema.GroupVersionKind{Group: "netclass.dev", Version: "v1", Kind: "Network"}, metav1.ConditionFalse, "KindNotServed", "netclass.dev/v1"},
		{schema.GroupVersionKind{Group: "k8s.ovn.org", Version: "v1", Kind: "UserDefinedNetwork"}, metav1.ConditionFalse, "KindNotServed", "UserDefinedNetwork"},
		{schema.GroupVersionKind{Group: "multinetwork.networking.k8s.io", Version: "v1", Kind: "Nope"}, metav1.ConditionFalse, "KindNotServed", "Nope"},
		{schema.GroupVersionKind{Group: "multinetwork.networking.k8s.io", Version: "v1", Kind: "NetworkClass"}, metav1.ConditionFalse, "Unsupported", "implements only"},
		{schema.GroupVersionKind{Group: "", Version: "v1", Kind: "ConfigMap"}, metav1.ConditionFalse, "Unsupported", "core group"},
		{schema.GroupVersionKind{Group: "netclass.dev", Version: "v1alpha1", Kind: "NetworkQoS"}, metav1.ConditionFalse, "Unsupported", "implements only"},
	} {
		t.Run(tc.gvk.String(), func(t *testing.T) {
			res, err := networkclass.ServedResource(served(), tc.gvk)
			if err != nil {
				t.Fatal(err)
			}
			c := networkclass.AcceptedCondition(tc.gvk, res)
			if c.Status != tc.status || c.Reason != tc.reason || !strings.Contains(c.Message, tc.msgHas) {
				t.Errorf("got %s/%s %q, want %s/%s containing %q", c.Status, c.Reason, c.Message, tc.status, tc.reason, tc.msgHas)
			}
		})
	}
}

func TestOwns(t *testing.T) {
	for _, tc := range []struct {
		gvk  schema.GroupVersionKind
		want bool
	}{
		{schema.GroupVersionKind{Group: "multinetwork.networking.k8s.io", Version: "v1", Kind: "PodNetwork"}, true},
		{schema.GroupVersionKind{Group: "multinetwork.networking.k8s.io", Version: "v2", Kind: "PodNetwork"}, true},
		{schema.GroupVersionKind{Group: "netclass.dev", Version: "v1alpha1", Kind: "Network"}, true},
		{schema.GroupVersionKind{Group: "netclass.dev", Version: "v1", Kind: "Netwrk"}, true},
		{schema.GroupVersionKind{Group: "multinetwork.networking.k8s.io", Version: "v1", Kind: "NetworkClass"}, false},
		{schema.GroupVersionKind{Group: "k8s.ovn.org", Version: "v1", Kind: "UserDefinedNetwork"}, false},
		{schema.GroupVersionKind{Group: "", Version: "v1", Kind: "ConfigMap"}, false},
		{schema.GroupVersionKind{Group: "sub.netclass.dev", Version: "v1", Kind: "Network"}, false},
	} {
		if got := networkclass.Owns(tc.gvk); got != tc.want {
			t.Errorf("Owns(%s) = %v, want %v", tc.gvk, got, tc.want)
		}
	}
}

// acceptedBy is an Accepted condition whose field is owned by manager on the status.
func acceptedBy(name, manager string) *multinetworkv1.NetworkClass {
	return &multinetworkv1.NetworkClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{
			Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"Accepted\"}":{".":{},"f:type":{}}}}}`),
		}}},
		Spec:   multinetworkv1.NetworkClassSpec{Group: "k8s.ovn.org", Version: "v1", Kind: "UserDefinedNetwork"},
		Status: multinetworkv1.NetworkClassStatus{Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionFalse, Reason: "Unsupported"}}},
	}
}

// Other implementations' classes are not judged; a stale condition netclass wrote on one
// is removed, one another manager wrote is kept.
func TestReconcileLeavesOthersAlone(t *testing.T) {
	stale, theirs := acceptedBy("stale", "netclass.dev"), acceptedBy("theirs", "ovnkube")
	env := harness.New(t, nil, []runtime.Object{stale, theirs})
	c, err := networkclass.New(env.NC, served(), env.NCInf, env.Recorder)
	if err != nil {
		t.Fatal(err)
	}
	env.Start(t, c.HasSynced)
	for name, wantConds := range map[string]int{"stale": 0, "theirs": 1} {
		res, err := c.Reconcile(env.Ctx, name)
		if err != nil || res.RequeueAfter != 0 {
			t.Fatalf("%s: %+v, %v", name, res, err)
		}
		nc, err := env.NC.MultinetworkV1().NetworkClasses().Get(env.Ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(nc.Status.Conditions) != wantConds {
			t.Errorf("%s: conditions %+v, want %d", name, nc.Status.Conditions, wantConds)
		}
	}
	if ev := env.Events(); len(ev) != 0 {
		t.Errorf("events on other implementations' classes: %v", ev)
	}
}

func TestReconcile(t *testing.T) {
	classes := []runtime.Object{
		&multinetworkv1.NetworkClass{ObjectMeta: metav1.ObjectMeta{Name: "netclass", Generation: 2},
			Spec: multinetworkv1.NetworkClassSpec{Group: "multinetwork.networking.k8s.io", Version: "v1", Kind: "PodNetwork"}},
		&multinetworkv1.NetworkClass{ObjectMeta: metav1.ObjectMeta{Name: "typo"},
			Spec: multinetworkv1.NetworkClassSpec{Group: "netclass.dev", Version: "v1", Kind: "Network"}},
	}
	env := harness.New(t, nil, classes)
	disc := served()
	c, err := networkclass.New(env.NC, disc, env.NCInf, env.Recorder)
	if err != nil {
		t.Fatal(err)
	}
	env.Start(t, c.HasSynced)
	for name, want := range map[string]string{"netclass": "Accepted", "typo": "KindNotServed"} {
		res, err := c.Reconcile(env.Ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter != networkclass.DefaultRecheck {
			t.Errorf("%s: requeue after %v", name, res.RequeueAfter)
		}
		nc, err := env.NC.MultinetworkV1().NetworkClasses().Get(env.Ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := condition.Get(nc.Status.Conditions, "Accepted"); got == nil || got.Reason != want || got.ObservedGeneration != nc.Generation {
			t.Errorf("%s: Accepted = %+v, want reason %s", name, got, want)
		}
	}
	if ev := env.Events(); len(ev) != 2 || !strings.HasPrefix(ev[0], "Normal Accepted") && !strings.HasPrefix(ev[1], "Normal Accepted") {
		t.Errorf("events %v", ev)
	}

	// The CRD goes away: the next recheck says so.
	disc.Resources = disc.Resources[2:]
	if _, err := c.Reconcile(env.Ctx, "netclass"); err != nil {
		t.Fatal(err)
	}
	nc, err := env.NC.MultinetworkV1().NetworkClasses().Get(env.Ctx, "netclass", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := condition.Get(nc.Status.Conditions, "Accepted"); got == nil || got.Reason != "KindNotServed" {
		t.Errorf("after the CRD went: Accepted = %+v", got)
	}
}
