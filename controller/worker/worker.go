// Package worker runs a reconcile function over a rate-limited workqueue of object keys, the
// way Kubernetes' own controllers do: informer event handlers enqueue keys, workers take them
// one at a time (a key is never reconciled by two workers at once), a failed key is retried
// with exponential backoff, and a key can ask to be looked at again after a delay.
package worker

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/controller/metrics"
)

// Result tells the worker what to do with a key reconciled without error.
type Result struct {
	// RequeueAfter, when positive, reconciles the key again after this delay.
	RequeueAfter time.Duration
}

// ReconcileFunc brings the object named by key ("name" or "namespace/name") to its desired
// state. It must be idempotent; an error retries the key with backoff.
type ReconcileFunc func(ctx context.Context, key string) (Result, error)

// Queue is a named, rate-limited workqueue of keys and the function that reconciles them.
type Queue struct {
	name      string
	queue     workqueue.TypedRateLimitingInterface[string]
	reconcile ReconcileFunc
	metrics   *metrics.Queue
}

// New returns a queue with client-go's default controller rate limiter (per-key exponential
// backoff from 5 ms to 1000 s, and an overall 10 qps / 100 burst bucket).
func New(name string, reconcile ReconcileFunc) *Queue {
	return NewWithRateLimiter(name, reconcile, workqueue.DefaultTypedControllerRateLimiter[string]())
}

// NewWithRateLimiter is New with a given rate limiter (tests use a fast one).
func NewWithRateLimiter(name string, reconcile ReconcileFunc, rl workqueue.TypedRateLimiter[string]) *Queue {
	m := metrics.NewQueue(name)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[string]{Name: name, MetricsProvider: m})
	return &Queue{name: name, queue: q, reconcile: reconcile, metrics: m}
}

// Name is the queue's name, used in logs.
func (q *Queue) Name() string { return q.name }

// Add enqueues a key.
func (q *Queue) Add(key string) { q.queue.Add(key) }

// AddObject enqueues the key of an object, or of the object inside a deletion tombstone.
func (q *Queue) AddObject(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(fmt.Errorf("queue %s: key of %T: %w", q.name, obj, err))
		return
	}
	q.queue.Add(key)
}

// Handler is an informer event handler that enqueues the object's own key.
func (q *Queue) Handler() cache.ResourceEventHandler {
	return MapHandler(func(obj any) []string {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			utilruntime.HandleError(fmt.Errorf("queue %s: key of %T: %w", q.name, obj, err))
			return nil
		}
		return []string{key}
	}, q)
}

// MapHandler is an informer event handler that enqueues the keys keys returns for the object
// (for updates: for the old and the new object). keys receives the object itself, never a
// tombstone.
func MapHandler(keys func(obj any) []string, q *Queue) cache.ResourceEventHandler {
	add := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		for _, k := range keys(obj) {
			q.queue.Add(k)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(old, obj any) { add(old); add(obj) },
		DeleteFunc: add,
	}
}

// Handler is an event handler for an informer's events.
type Handler struct {
	Informer cache.SharedIndexInformer
	Handler  cache.ResourceEventHandler
}

// AddHandlers adds each handler to its informer and returns whether each has
// been delivered its informer's initial list.
func AddHandlers(hs ...Handler) ([]cache.InformerSynced, error) {
	synced := make([]cache.InformerSynced, 0, len(hs))
	for _, h := range hs {
		reg, err := h.Informer.AddEventHandler(h.Handler)
		if err != nil {
			return nil, fmt.Errorf("add event handler: %w", err)
		}
		synced = append(synced, reg.HasSynced)
	}
	return synced, nil
}

// LabelsHandler is MapHandler for objects whose labels alone matter (a
// namespace's, which selectors read): an update whose labels are unchanged,
// such as an informer's resync, queues nothing.
func LabelsHandler(keys func(obj any) []string, q *Queue) cache.ResourceEventHandler {
	return filtered(keys, q, func(o, n metav1.Object) bool { return !maps.Equal(o.GetLabels(), n.GetLabels()) })
}

// SpecOrLabelsHandler is MapHandler for objects whose spec and labels alone
// matter: an update of their status only (another controller's write, as
// a PodNetwork's InUse at every claim), or a resync, queues nothing.
func SpecOrLabelsHandler(keys func(obj any) []string, q *Queue) cache.ResourceEventHandler {
	return filtered(keys, q, func(o, n metav1.Object) bool {
		return o.GetGeneration() != n.GetGeneration() || !maps.Equal(o.GetLabels(), n.GetLabels())
	})
}

// filtered is MapHandler whose updates queue only when changed says so.
func filtered(keys func(obj any) []string, q *Queue, changed func(old, obj metav1.Object) bool) cache.ResourceEventHandler {
	h := MapHandler(keys, q).(cache.ResourceEventHandlerFuncs)
	update := h.UpdateFunc
	h.UpdateFunc = func(old, obj any) {
		o, errOld := meta.Accessor(old)
		n, errNew := meta.Accessor(obj)
		if errOld == nil && errNew == nil && !changed(o, n) {
			return
		}
		update(old, obj)
	}
	return h
}

// Run starts workers goroutines and blocks until ctx ends, then shuts the queue down and
// waits for the workers to finish their current key. While it runs, the queue's metrics
// are registered on the registry ctx carries (controller/metrics.WithRegisterer), if any.
func (q *Queue) Run(ctx context.Context, workers int) {
	logger := klog.FromContext(ctx).WithValues("controller", q.name)
	ctx = klog.NewContext(ctx, logger)
	if reg := metrics.Registerer(ctx); reg != nil {
		if err := reg.Register(q.metrics); err != nil {
			logger.Error(err, "Registering the queue's metrics failed")
		} else {
			defer reg.Unregister(q.metrics)
		}
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for q.next(ctx) {
			}
		})
	}
	logger.V(1).Info("Started workers", "workers", workers)
	<-ctx.Done()
	q.queue.ShutDown()
	wg.Wait()
	logger.V(1).Info("Stopped workers")
}

// next reconciles one key; it returns false once the queue is shut down.
func (q *Queue) next(ctx context.Context) bool {
	key, quit := q.queue.Get()
	if quit {
		return false
	}
	defer q.queue.Done(key)
	logger := klog.FromContext(ctx).WithValues("key", key)
	ctx = klog.NewContext(ctx, logger)
	start := time.Now()
	res, err := q.reconcile(ctx, key)
	q.metrics.ObserveReconcile(result(err), time.Since(start))
	if apierrors.IsConflict(err) {
		// The cache had not seen our own last write yet: routine, retried at once.
		logger.V(2).Info("Conflict, will retry", "err", err)
		q.queue.AddRateLimited(key)
		return true
	}
	if err != nil {
		logger.Error(err, "Reconcile failed, will retry", "retries", q.queue.NumRequeues(key))
		q.queue.AddRateLimited(key)
		return true
	}
	q.queue.Forget(key)
	if res.RequeueAfter > 0 {
		q.queue.AddAfter(key, res.RequeueAfter)
	}
	logger.V(4).Info("Reconciled", "duration", time.Since(start), "requeueAfter", res.RequeueAfter)
	return true
}

func result(err error) string {
	switch {
	case err == nil:
		return metrics.Success
	case apierrors.IsConflict(err):
		return metrics.Conflict
	}
	return metrics.Error
}

// Len is the number of keys waiting (for tests and metrics).
func (q *Queue) Len() int { return q.queue.Len() }
