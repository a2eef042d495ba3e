package peers

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
)

// countingClient is a fake API server that counts the reads it serves.
func countingClient(objs ...runtime.Object) (*fake.Clientset, *atomic.Int64) {
	c := fake.NewClientset(objs...)
	var reads atomic.Int64
	c.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if v := a.GetVerb(); v == "get" || v == "list" {
			reads.Add(1)
		}
		return false, nil, nil
	})
	return c, &reads
}

// TestResolutionFromCachesMakesNoAPICalls: once the informers synced, any
// number of resolutions (here 100 Prepares' worth of destinations) reads
// nothing from the API server, and answers what the API server would.
func TestResolutionFromCachesMakesNoAPICalls(t *testing.T) {
	db1, db2, web := pod("games", "db1", "db"), pod("games", "db2", "db"), pod("games", "web", "web")
	db1.Spec.Containers = []corev1.Container{{Name: "big", Image: "x"}}
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "games", Labels: map[string]string{"env": "prod"}}},
		&db1, &db2, &web,
	}
	for _, c := range []resourceapi.ResourceClaim{claim(db1, "netclass", "", "blue", "10.1.0.11/24"), claim(db2, "netclass", "", "blue", "10.1.0.12/24"), claim(web, "netclass", "", "blue", "10.1.0.20/24")} {
		objs = append(objs, &c)
	}
	client, reads := countingClient(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	listers, err := NewListers(factory)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("cache of %v did not sync", typ)
		}
	}
	t.Cleanup(factory.Shutdown)
	if p, err := listers.PodLister.Pods("games").Get("db1"); err != nil || len(p.Spec.Containers) != 0 || p.Labels["app"] != "db" {
		t.Fatalf("cached pod %+v (%v): want metadata only", p, err)
	}

	cached := Resolver{API: listers, Context: func() (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }}
	direct := Resolver{API: ClientAPI{Client: client}, Context: cached.Context}
	blue := network.Network{Ref: attachment.NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "blue"}}
	dests := []ncv1.Destination{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}},
		{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
	}
	before := reads.Load()
	for range 100 {
		for _, d := range dests {
			if _, err := cached.Addresses("games", d, blue); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := reads.Load() - before; n != 0 {
		t.Fatalf("100 resolutions from the caches made %d API reads, want 0", n)
	}
	for _, d := range dests {
		a, _ := cached.Addresses("games", d, blue)
		before := reads.Load()
		b, _ := direct.Addresses("games", d, blue)
		if !slices.Equal(a, b) || len(a) == 0 {
			t.Fatalf("caches answer %v, the API %v", a, b)
		}
		if reads.Load() == before {
			t.Fatal("the counting API server counts nothing: the test cannot fail")
		}
	}
}
