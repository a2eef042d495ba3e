package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"

	"github.com/netclass-dev/netclass/controller/metrics"
)

// reconciler fails key "bad" once, and conflicts on key "race" once.
type reconciler struct {
	mu   sync.Mutex
	seen map[string]int
}

func (r *reconciler) reconcile(_ context.Context, key string) (Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[key]++
	switch {
	case key == "bad" && r.seen[key] == 1:
		return Result{}, errors.New("API server down")
	case key == "race" && r.seen[key] == 1:
		return Result{}, apierrors.NewConflict(schema.GroupResource{Resource: "podnetworks"}, key, errors.New("stale"))
	}
	return Result{}, nil
}

// A running queue's reconciles and workqueue activity are on the registry
// its context carries, labelled with its name, and leave it when it stops.
func TestQueueMetrics(t *testing.T) {
	r := &reconciler{seen: map[string]int{}}
	q := NewWithRateLimiter("podnetwork", r.reconcile, workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Millisecond, 10*time.Millisecond))
	for _, k := range []string{"a", "bad", "race"} {
		q.Add(k)
	}
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithCancel(metrics.WithRegisterer(context.Background(), reg))
	done := make(chan struct{})
	go func() { defer close(done); q.Run(ctx, 2) }()
	want := `
# HELP netclass_controller_reconciles_total Reconciles, by reconciler and result.
# TYPE netclass_controller_reconciles_total counter
netclass_controller_reconciles_total{controller="podnetwork",result="conflict"} 1
netclass_controller_reconciles_total{controller="podnetwork",result="error"} 1
netclass_controller_reconciles_total{controller="podnetwork",result="success"} 3
# HELP netclass_controller_workqueue_adds_total Keys added to the reconciler's workqueue.
# TYPE netclass_controller_workqueue_adds_total counter
netclass_controller_workqueue_adds_total{controller="podnetwork"} 5
# HELP netclass_controller_workqueue_depth Keys waiting in the reconciler's workqueue.
# TYPE netclass_controller_workqueue_depth gauge
netclass_controller_workqueue_depth{controller="podnetwork"} 0
# HELP netclass_controller_workqueue_retries_total Keys put back with a rate-limited delay after a failed reconcile.
# TYPE netclass_controller_workqueue_retries_total counter
netclass_controller_workqueue_retries_total{controller="podnetwork"} 2
`
	names := []string{"netclass_controller_reconciles_total", "netclass_controller_workqueue_adds_total",
		"netclass_controller_workqueue_depth", "netclass_controller_workqueue_retries_total"}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("reconciles %v: %v", r.seen, err)
		}
		time.Sleep(5 * time.Millisecond) // polling the registry: the queue has no event to wait on
	}
	if n, err := testutil.GatherAndCount(reg, "netclass_controller_workqueue_queue_duration_seconds", "netclass_controller_reconcile_duration_seconds"); err != nil || n != 2 {
		t.Errorf("latency histograms: %d series, %v", n, err)
	}
	cancel()
	<-done
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("%d series left after the queue stopped (%v)", n, err)
	}
}

// A queue's depth counts keys added before it runs (informers start first).
func TestDepthBeforeRun(t *testing.T) {
	q := New("network", func(context.Context, string) (Result, error) { return Result{}, nil })
	q.Add("x")
	q.Add("y")
	q.Add("x")
	reg := prometheus.NewRegistry()
	reg.MustRegister(q.metrics)
	want := `
# HELP netclass_controller_workqueue_depth Keys waiting in the reconciler's workqueue.
# TYPE netclass_controller_workqueue_depth gauge
netclass_controller_workqueue_depth{controller="network"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "netclass_controller_workqueue_depth"); err != nil {
		t.Error(err)
	}
}

// LabelsHandler queues on an object's arrival and departure and on a change
// of its labels; an update that leaves them (a resync, a status write)
// queues nothing.
func TestLabelsHandler(t *testing.T) {
	q := New("network", func(context.Context, string) (Result, error) { return Result{}, nil })
	h := LabelsHandler(func(obj any) []string { return []string{obj.(*corev1.Namespace).Name} }, q)
	ns := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	h.OnUpdate(ns("same", map[string]string{"tier": "paid"}), ns("same", map[string]string{"tier": "paid"}))
	if q.Len() != 0 {
		t.Fatalf("an update with the same labels queued %d keys", q.Len())
	}
	h.OnUpdate(ns("relabelled", map[string]string{"tier": "paid"}), ns("relabelled", map[string]string{"tier": "free"}))
	h.OnAdd(ns("new", nil), false)
	h.OnDelete(ns("gone", nil))
	if q.Len() != 3 {
		t.Fatalf("%d keys queued, want relabelled, new and gone", q.Len())
	}
}

// SpecOrLabelsHandler queues on a change of an object's spec (its
// generation) or labels, not of its status alone.
func TestSpecOrLabelsHandler(t *testing.T) {
	q := New("networkqos", func(context.Context, string) (Result, error) { return Result{}, nil })
	h := SpecOrLabelsHandler(func(obj any) []string { return []string{obj.(*corev1.Namespace).Name} }, q)
	obj := func(gen int64, labels map[string]string, phase corev1.NamespacePhase) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n", Generation: gen, Labels: labels}, Status: corev1.NamespaceStatus{Phase: phase}}
	}
	h.OnUpdate(obj(1, nil, corev1.NamespaceActive), obj(1, nil, corev1.NamespaceTerminating))
	if q.Len() != 0 {
		t.Fatal("a status-only update queued")
	}
	h.OnUpdate(obj(1, nil, corev1.NamespaceActive), obj(2, nil, corev1.NamespaceActive))
	if q.Len() != 1 {
		t.Fatal("a spec change queued nothing")
	}
}
