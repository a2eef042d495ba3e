package generated_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/netclass-dev/netclass/api/generated/clientset/versioned/fake"
	"github.com/netclass-dev/netclass/api/generated/informers/externalversions"
	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

// crdResources reads conf/crd/*.yaml: group/version/plural of every CRD.
func crdResources(t *testing.T) map[schema.GroupVersionResource]bool {
	t.Helper()
	files, err := filepath.Glob("../../conf/crd/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRD manifests under conf/crd: %v", err)
	}
	out := map[schema.GroupVersionResource]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range crd.Spec.Versions {
			out[schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}] = true
		}
	}
	return out
}

// TestClientsetNamesTheCRDResources creates one object of every kind through the fake
// clientset and checks that the resource the client addressed is the one the CRD serves
// (client-gen's own plural of NetworkQoS would be "networkqoss").
func TestClientsetNamesTheCRDResources(t *testing.T) {
	ctx := context.Background()
	c := fake.NewSimpleClientset()
	meta := metav1.ObjectMeta{Name: "x", Namespace: "ns"}
	cluster := metav1.ObjectMeta{Name: "x"}
	calls := []func() error{
		func() error {
			_, err := c.MultinetworkV1().NetworkClasses().Create(ctx, &multinetworkv1.NetworkClass{ObjectMeta: cluster}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.MultinetworkV1().PodNetworks().Create(ctx, &multinetworkv1.PodNetwork{ObjectMeta: cluster}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.NetclassV1alpha1().ClusterNetworks().Create(ctx, &netclassv1alpha1.ClusterNetwork{ObjectMeta: cluster}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.NetclassV1alpha1().NodeNetworks().Create(ctx, &netclassv1alpha1.NodeNetwork{ObjectMeta: cluster}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.NetclassV1alpha1().Networks("ns").Create(ctx, &netclassv1alpha1.Network{ObjectMeta: meta}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := c.NetclassV1alpha1().NetworkQoSes("ns").Create(ctx, &netclassv1alpha1.NetworkQoS{ObjectMeta: meta}, metav1.CreateOptions{})
			return err
		},
	}
	for _, call := range calls {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	served := crdResources(t)
	seen := map[schema.GroupVersionResource]bool{}
	for _, a := range c.Actions() {
		gvr := a.GetResource()
		seen[gvr] = true
		if !served[gvr] {
			t.Errorf("the clientset addresses %s, which no CRD in conf/crd serves", gvr)
		}
	}
	for gvr := range served {
		if !seen[gvr] {
			t.Errorf("CRD resource %s has no client in the clientset", gvr)
		}
	}
}

// TestInformersSeeObjects runs the informer factory on the fake clientset and reads an
// object back through a lister.
func TestInformersSeeObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := fake.NewSimpleClientset(&netclassv1alpha1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns"}})
	f := externalversions.NewSharedInformerFactory(c, 0)
	inf := f.Netclass().V1alpha1().NetworkQoSes()
	lister := inf.Lister()
	f.Start(ctx.Done())
	defer f.Shutdown() // after cancel: Shutdown waits for the informers to stop
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		t.Fatal("informer did not sync")
	}
	if _, err := lister.NetworkQoSes("ns").Get("q"); err != nil {
		t.Fatalf("lister: %v", err)
	}
}
