// Package harness runs the reconcilers of controller/ against client-go fake clientsets in
// unit tests: it builds the fake clients and informer factories, a fake event recorder, and
// starts and syncs the informers once the reconciler under test registered its handlers.
package harness

import (
	"context"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	ncfake "github.com/netclass-dev/netclass/api/generated/clientset/versioned/fake"
	ncinformers "github.com/netclass-dev/netclass/api/generated/informers/externalversions"
)

// Env is one test's fake cluster.
type Env struct {
	Kube     *kubefake.Clientset
	NC       *ncfake.Clientset
	KubeInf  informers.SharedInformerFactory
	NCInf    ncinformers.SharedInformerFactory
	Recorder *record.FakeRecorder
	Ctx      context.Context
}

// New builds fake clientsets holding kubeObjs and ncObjs (netclass's own kinds).
func New(t *testing.T, kubeObjs, ncObjs []runtime.Object) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	kube := kubefake.NewSimpleClientset(kubeObjs...)
	nc := ncfake.NewSimpleClientset(ncObjs...)
	e := &Env{
		Kube: kube, NC: nc,
		KubeInf:  informers.NewSharedInformerFactory(kube, 0),
		NCInf:    ncinformers.NewSharedInformerFactory(nc, 0),
		Recorder: record.NewFakeRecorder(1000),
		Ctx:      ctx,
	}
	t.Cleanup(func() {
		cancel()
		e.KubeInf.Shutdown()
		e.NCInf.Shutdown()
	})
	return e
}

// Start starts the informers and waits until they and synced (the reconciler's handlers)
// are synced.
func (e *Env) Start(t *testing.T, synced cache.InformerSynced) {
	t.Helper()
	e.KubeInf.Start(e.Ctx.Done())
	e.NCInf.Start(e.Ctx.Done())
	if !cache.WaitForCacheSync(e.Ctx.Done(), synced) {
		t.Fatal("informers did not sync")
	}
}

// Resync waits until every informer cache reflects the fake clientsets' current objects,
// so that a second Reconcile sees the first one's writes: it polls check until true.
func (e *Env) Resync(t *testing.T, what string, check func() bool) {
	t.Helper()
	for !check() {
		select {
		case <-e.Ctx.Done():
			t.Fatalf("cache never showed %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Events drains the events recorded so far ("Type Reason Message" each).
func (e *Env) Events() []string {
	var out []string
	for {
		select {
		case ev := <-e.Recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

// Deallocate clears the claim's allocation, as the resource claim controller
// does, and waits until the informer cache has it so.
func (e *Env) Deallocate(t *testing.T, claim *resourceapi.ResourceClaim) {
	t.Helper()
	claim.Status.Allocation = nil
	if _, err := e.Kube.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(e.Ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	claims := e.KubeInf.Resource().V1().ResourceClaims().Lister()
	e.Resync(t, "the deallocated claim", func() bool {
		c, err := claims.ResourceClaims(claim.Namespace).Get(claim.Name)
		return err == nil && c.Status.Allocation == nil
	})
}
