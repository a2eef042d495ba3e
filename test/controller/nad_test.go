//go:build testbed

package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/netclass-dev/netclass/controller/nad"
	"github.com/netclass-dev/netclass/test/testbed"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// nadCRD is the NetworkAttachmentDefinition CRD as Multus ships it, cut to
// what the API server needs (spec.config a string).
func nadCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "network-attachment-definitions.k8s.cni.cncf.io"},
		"spec": map[string]any{
			"group": "k8s.cni.cncf.io", "scope": "Namespaced",
			"names": map[string]any{"plural": "network-attachment-definitions", "singular": "network-attachment-definition",
				"kind": "NetworkAttachmentDefinition", "shortNames": []any{"net-attach-def"}},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{
					"spec": map[string]any{"type": "object", "properties": map[string]any{"config": map[string]any{"type": "string"}}},
				}}}}},
		},
	}}
}

// installNADCRD installs the NAD CRD unless it is there, and removes it at
// the end if it installed it.
func installNADCRD(t *testing.T, e *env, dyn dynamic.Interface) {
	t.Helper()
	crds := dyn.Resource(crdGVR)
	if _, err := crds.Get(e.ctx, "network-attachment-definitions.k8s.cni.cncf.io", metav1.GetOptions{}); err == nil {
		t.Log("the NAD CRD is installed already (Multus?): left as it is")
		return
	}
	if _, err := crds.Create(e.ctx, nadCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatalf("install the NAD CRD: %v", err)
	}
	t.Cleanup(func() {
		e.deleteAndWait(t, "the NAD CRD", func(ctx context.Context) (bool, error) {
			err := crds.Delete(ctx, "network-attachment-definitions.k8s.cni.cncf.io", metav1.DeleteOptions{})
			return apierrors.IsNotFound(err), client(err)
		})
	})
}

// testGeneratedNAD runs the NAD reconciler as the controller's service
// account (conf/deploy's RBAC) against the real API server: a PodNetwork
// listing the namespace gets its NAD once the CRD is installed; a
// hand-written NAD of another PodNetwork's name is left alone with an
// Event; dropping the namespace deletes the NAD, held by its finalizer
// while a pod names it, gone once the pod is.
func testGeneratedNAD(t *testing.T, e *env) {
	dyn := dynamic.NewForConfigOrDie(testbed.RestConfig(t))
	nads := dyn.Resource(nad.GVR).Namespace(e.ns)
	pn, taken := e.name("nadpn"), e.name("nadtaken")
	e.createPodNetwork(t, pn, "netclass.dev", bridgeParams("ncnad"+e.suffix))
	e.createPodNetwork(t, taken, "netclass.dev", bridgeParams("ncnat"+e.suffix))
	waitReady(t, e, pn, metav1.ConditionTrue, "Ready")
	waitReady(t, e, taken, metav1.ConditionTrue, "Ready")
	// Its cleanup runs before the PodNetworks': deleting the CRD deletes the
	// NADs left, whose finalizer the controller (still running) releases.
	installNADCRD(t, e, dyn)
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, "NAD API served", func(ctx context.Context) (bool, string, error) {
		_, err := nads.List(ctx, metav1.ListOptions{})
		return err == nil, fmt.Sprint(err), nil
	})
	hand := &unstructured.Unstructured{}
	hand.SetGroupVersionKind(nad.GVK)
	hand.SetName(taken)
	_ = unstructured.SetNestedField(hand.Object, `{"cniVersion":"1.0.0","type":"netclass-bridge"}`, "spec", "config")
	if _, err := nads.Create(e.ctx, hand, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{pn, taken} {
		e.patchPodNetwork(t, name, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, nad.AnnotationNamespaces, e.ns))
	}
	getNAD := func(name string) func(context.Context) (*unstructured.Unstructured, error) {
		return func(ctx context.Context) (*unstructured.Unstructured, error) {
			return nads.Get(ctx, name, metav1.GetOptions{})
		}
	}
	waitFor(t, e, "generated NAD "+pn, getNAD(pn), func(u *unstructured.Unstructured) (bool, string) {
		return u != nil && nad.Owned(u) && len(u.GetFinalizers()) == 1, fmt.Sprint(u)
	})
	waitEvent(t, e, "default", taken, nad.EventNotOwned)
	if u, err := nads.Get(e.ctx, taken, metav1.GetOptions{}); err != nil || nad.Owned(u) || len(u.GetFinalizers()) != 0 {
		t.Errorf("the hand-written NAD was touched: %v %v", u, err)
	}
	pod := testbed.Pod(e.ns, "names-"+pn, "sleep", "3600")
	pod.Annotations = map[string]string{nad.AnnotationNetworks: pn}
	pod.Spec.NodeSelector = map[string]string{"netclass.dev/no-such-node": "true"} // stays Pending: never runs, still names the NAD
	if _, err := e.kube.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.patchPodNetwork(t, pn, fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, nad.AnnotationNamespaces))
	waitFor(t, e, "NAD "+pn+" deleting, held by the pod", getNAD(pn), func(u *unstructured.Unstructured) (bool, string) {
		return u != nil && u.GetDeletionTimestamp() != nil, fmt.Sprint(u)
	})
	if err := e.kube.CoreV1().Pods(e.ns).Delete(e.ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	e.deleteAndWait(t, "NAD "+pn+" once its pod is gone", func(ctx context.Context) (bool, error) {
		_, err := nads.Get(ctx, pn, metav1.GetOptions{})
		return apierrors.IsNotFound(err), client(err)
	})
}
