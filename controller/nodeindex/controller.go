package nodeindex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/worker"
)

// key is the one work item: the indexes are decided for all nodes at once.
const key = "nodes"

// ReasonDuplicateNodeIndex is the Warning event on a node whose index another,
// older node has (someone set it by hand).
const ReasonDuplicateNodeIndex = "DuplicateNodeIndex"

// Controller keeps every node indexed.
type Controller struct {
	kube     kubernetes.Interface
	nodes    corelisters.NodeLister
	synced   cache.InformerSynced
	queue    *worker.Queue
	recorder record.EventRecorder
}

// New wires the controller to the Node informer.
func New(kube kubernetes.Interface, kubeInf informers.SharedInformerFactory, recorder record.EventRecorder) (*Controller, error) {
	nodeInf := kubeInf.Core().V1().Nodes()
	c := &Controller{kube: kube, nodes: nodeInf.Lister(), synced: nodeInf.Informer().HasSynced, recorder: recorder}
	c.queue = worker.New("nodeindex", c.Reconcile)
	_, err := nodeInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.queue.Add(key) },
		DeleteFunc: func(any) { c.queue.Add(key) },
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := obj.(*corev1.Node)
			if ok1 && ok2 && o.Annotations[ncv1.AnnotationNodeIndex] == n.Annotations[ncv1.AnnotationNodeIndex] {
				return // heartbeats and everything else: the index did not change
			}
			c.queue.Add(key)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("node informer handler: %w", err)
	}
	return c, nil
}

// HasSynced reports whether the node cache is filled.
func (c *Controller) HasSynced() bool { return c.synced() }

// Run reconciles until ctx ends, with one worker whatever is asked: there is
// one work item.
func (c *Controller) Run(ctx context.Context, _ int) { c.queue.Run(ctx, 1) }

// Reconcile assigns the missing indexes.
func (c *Controller) Reconcile(ctx context.Context, _ string) (worker.Result, error) {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return worker.Result{}, fmt.Errorf("list nodes: %w", err)
	}
	assign, duplicates := Plan(nodes)
	for _, name := range duplicates {
		if n, err := c.nodes.Get(name); err == nil {
			c.recorder.Eventf(n, corev1.EventTypeWarning, ReasonDuplicateNodeIndex,
				"node index %s is also another, older node's: this node is given no address blocks until it is re-created", n.Annotations[ncv1.AnnotationNodeIndex])
		}
	}
	var errs []error
	for _, a := range assign {
		if err := c.set(ctx, a); err != nil {
			errs = append(errs, err)
			continue
		}
		klog.FromContext(ctx).Info("Assigned a node index", "node", a.Node, "index", a.Index)
	}
	return worker.Result{}, errors.Join(errs...)
}

// set writes the annotation. The plan is deterministic, so a reconcile on a
// cache that has not seen the previous patch yet writes the same values; an
// index that is already set cannot be changed (conf/deploy's admission policy).
func (c *Controller) set(ctx context.Context, a Assignment) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{ncv1.AnnotationNodeIndex: strconv.Itoa(a.Index)}}})
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Nodes().Patch(ctx, a.Node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: contract.FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("set index %d of node %s: %w", a.Index, a.Node, err)
	}
	return nil
}
