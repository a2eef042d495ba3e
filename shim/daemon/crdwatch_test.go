package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// servedAfter serves the ClusterNetworkPolicy from its calls'th question
// on; before, its group is not found, or discovery fails.
type servedAfter struct {
	calls   int32
	asked   atomic.Int32
	failing bool
	// tenth, when set, is closed at the tenth question.
	tenth chan struct{}
}

func (s *servedAfter) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	n := s.asked.Add(1)
	if n == 10 && s.tenth != nil {
		close(s.tenth)
	}
	switch {
	case n >= s.calls && gv == "policy.networking.k8s.io/v1beta1":
		return &metav1.APIResourceList{GroupVersion: gv, APIResources: []metav1.APIResource{{Name: clusterResource}}}, nil
	case s.failing:
		return nil, errors.New("the server is currently unable to handle the request")
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
}

var laterKinds = []laterKind{
	{"MultiNetworkPolicy", "k8s.cni.cncf.io/v1beta1", multiResource},
	{"ClusterNetworkPolicy", "policy.networking.k8s.io/v1beta1", clusterResource},
}

// A kind served after a while, through failing discovery too, is found.
func TestAwaitServedFindsTheKindServedLater(t *testing.T) {
	for _, failing := range []bool{false, true} {
		dc := &servedAfter{calls: 5, failing: failing}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		k, err := awaitServed(ctx, dc, laterKinds, time.Millisecond, nil, 0)
		cancel()
		if err != nil || k.kind != "ClusterNetworkPolicy" {
			t.Fatalf("failing discovery %v: %+v, %v; want ClusterNetworkPolicy", failing, k, err)
		}
		if got := dc.asked.Load(); got < dc.calls {
			t.Errorf("failing discovery %v: found after %d questions, before it was served", failing, got)
		}
	}
}

// Nothing served: the watch ends with its context, finding nothing.
func TestAwaitServedEndsWithItsContext(t *testing.T) {
	dc := &servedAfter{calls: 1 << 30, tenth: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		k, err := awaitServed(ctx, dc, laterKinds, time.Millisecond, nil, 0)
		if err == nil {
			err = fmt.Errorf("found %s", k.kind)
		}
		done <- err
	}()
	select { // it keeps asking
	case <-dc.tenth:
	case err := <-done:
		cancel()
		t.Fatalf("awaitServed returned after %d questions, nothing served: %v", dc.asked.Load(), err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("awaitServed after its context ended: %v, want context.Canceled", err)
	}
}

// A kick makes the watch look at once, however long its period.
func TestAwaitServedLooksWhenKicked(t *testing.T) {
	dc := &servedAfter{calls: 3}
	kick := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan laterKind, 1)
	go func() {
		k, _ := awaitServed(ctx, dc, laterKinds, time.Hour, kick, 0)
		done <- k
	}()
	for {
		select {
		case k := <-done:
			if k.kind != "ClusterNetworkPolicy" || dc.asked.Load() < dc.calls {
				t.Fatalf("found %+v after %d questions, want ClusterNetworkPolicy after %d", k, dc.asked.Load(), dc.calls)
			}
			return
		case kick <- struct{}{}:
		case <-ctx.Done():
			t.Fatalf("not found after %d questions", dc.asked.Load())
		}
	}
}

// Kicks ask discovery at most once per kickEvery, however many come.
func TestAwaitServedBoundsKicks(t *testing.T) {
	dc := &servedAfter{calls: 1 << 30}
	kick := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = awaitServed(ctx, dc, laterKinds, time.Hour, kick, time.Hour)
	}()
	for range 100 {
		kick <- struct{}{}
	}
	cancel()
	<-done
	if got := dc.asked.Load(); got != int32(len(laterKinds)) {
		t.Errorf("100 kicks asked discovery %d times, want one round (%d)", got, len(laterKinds))
	}
}
