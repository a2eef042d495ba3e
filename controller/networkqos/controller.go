// Package networkqos reconciles NetworkQoS objects: it validates what the schema cannot
// (label selectors, the rules as the plugins' qos block), counts the netclass networks the
// object selects, and reports both in the Accepted condition. The Ready condition belongs
// to netclass-dra, which applies the rules (Applied / ApplyFailed); the controller only sets
// it False with InvalidConfig for an invalid object, and Unknown/Pending until netclass-dra
// reports on a valid one.
package networkqos

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	ncclient "github.com/netclass-dev/netclass/api/generated/clientset/versioned"
	ncinformers "github.com/netclass-dev/netclass/api/generated/informers/externalversions"
	mnlisters "github.com/netclass-dev/netclass/api/generated/listers/multinetwork/v1"
	nclisters "github.com/netclass-dev/netclass/api/generated/listers/netclass/v1alpha1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/controller/worker"
)

// Name is the controller's name in logs and the workqueue's name.
const Name = "networkqos"

// The controller's own condition.
const (
	// ConditionAccepted: the object is valid (True, reason Accepted) or not (False,
	// reason InvalidConfig); the message says what it selects or what is wrong.
	ConditionAccepted = "Accepted"
	ReasonAccepted    = "Accepted"
)

// Values of status.status the controller writes.
const (
	StatusInvalid = "InvalidConfig"
	StatusPending = "Pending"
)

// Controller is the NetworkQoS reconciler.
type Controller struct {
	client      ncclient.Interface
	qoses       nclisters.NetworkQoSLister
	podNetworks mnlisters.PodNetworkLister
	networks    nclisters.NetworkLister
	recorder    record.EventRecorder
	queue       *worker.Queue
	synced      []cache.InformerSynced
}

// New wires the controller to the NetworkQoS, PodNetwork and Network informers.
func New(client ncclient.Interface, nc ncinformers.SharedInformerFactory, recorder record.EventRecorder) (*Controller, error) {
	qInf := nc.Netclass().V1alpha1().NetworkQoSes()
	pnInf := nc.Multinetwork().V1().PodNetworks()
	netInf := nc.Netclass().V1alpha1().Networks()
	c := &Controller{
		client: client, qoses: qInf.Lister(), podNetworks: pnInf.Lister(), networks: netInf.Lister(), recorder: recorder,
	}
	c.queue = worker.New(Name, c.Reconcile)
	synced, err := worker.AddHandlers(
		worker.Handler{Informer: qInf.Informer(), Handler: c.queue.Handler()},
		// which networks a NetworkQoS selects reads their labels and spec, not
		// their status (a PodNetwork's changes at every claim)
		worker.Handler{Informer: pnInf.Informer(), Handler: worker.SpecOrLabelsHandler(func(any) []string { return c.keys("") }, c.queue)},
		worker.Handler{Informer: netInf.Informer(), Handler: worker.SpecOrLabelsHandler(c.namespaceKeys, c.queue)},
	)
	if err != nil {
		return nil, fmt.Errorf("networkqos controller: %w", err)
	}
	c.synced = synced
	return c, nil
}

// keys returns the keys of the NetworkQoS objects of namespace ns ("" = all).
func (c *Controller) keys(ns string) []string {
	var list []*netclassv1alpha1.NetworkQoS
	var err error
	if ns == "" {
		list, err = c.qoses.List(labels.Everything())
	} else {
		list, err = c.qoses.NetworkQoSes(ns).List(labels.Everything())
	}
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(list))
	for _, q := range list {
		out = append(out, q.Namespace+"/"+q.Name)
	}
	return out
}

func (c *Controller) namespaceKeys(obj any) []string {
	if n, ok := obj.(*netclassv1alpha1.Network); ok {
		return c.keys(n.Namespace)
	}
	return nil
}

// HasSynced reports whether the informers delivered their initial lists to the handlers.
func (c *Controller) HasSynced() bool {
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Run reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) { c.queue.Run(ctx, workers) }

// Reconcile validates one NetworkQoS and writes its status.
func (c *Controller) Reconcile(ctx context.Context, key string) (worker.Result, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return worker.Result{}, fmt.Errorf("networkqos key %q: %w", key, err)
	}
	q, err := c.qoses.NetworkQoSes(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return worker.Result{}, nil
	}
	if err != nil {
		return worker.Result{}, fmt.Errorf("get networkqos %s: %w", key, err)
	}
	upd := q.DeepCopy()
	accepted := condition.Set(&upd.Status.Conditions, c.accepted(q), q.Generation)
	ready, readyChange := setReady(upd, q.Generation)
	if !accepted.Updated && !readyChange.Updated && upd.Status.Status == q.Status.Status {
		return worker.Result{}, nil
	}
	out, err := c.client.NetclassV1alpha1().NetworkQoSes(ns).UpdateStatus(ctx, upd, metav1.UpdateOptions{FieldManager: contract.FieldManager})
	if err != nil {
		if !apierrors.IsConflict(err) {
			c.recorder.Eventf(q, corev1.EventTypeWarning, "UpdateFailed", "Updating status failed: %v", err)
		}
		return worker.Result{}, fmt.Errorf("update status of networkqos %s: %w", key, err)
	}
	acc := condition.Get(out.Status.Conditions, ConditionAccepted)
	klog.FromContext(ctx).V(2).Info("Updated status", "accepted", acc.Reason)
	if accepted.Transitioned {
		typ := corev1.EventTypeNormal
		if acc.Status != metav1.ConditionTrue {
			typ = corev1.EventTypeWarning
		}
		c.recorder.Event(out, typ, acc.Reason, acc.Message)
	}
	if readyChange.Transitioned && ready != nil && ready.Reason != acc.Reason {
		c.recorder.Event(out, corev1.EventTypeNormal, ready.Reason, ready.Message)
	}
	return worker.Result{}, nil
}

// accepted computes the Accepted condition.
func (c *Controller) accepted(q *netclassv1alpha1.NetworkQoS) metav1.Condition {
	if err := Validate(q); err != nil {
		return condition.New(ConditionAccepted, metav1.ConditionFalse, netclassv1alpha1.ReasonInvalidConfig, err.Error())
	}
	pns, nets := c.selected(q)
	return condition.New(ConditionAccepted, metav1.ConditionTrue, ReasonAccepted, describe(q, pns, nets))
}

// setReady sets Ready: False/InvalidConfig when the object is invalid; otherwise the sum of
// the nodes' reports (status.nodes, each written by its node's netclass-dra): False/ApplyFailed
// when a node failed, True/Applied when nodes enforce it and none failed, Unknown/Pending
// while no node runs an attachment it selects. It returns the Ready condition it wrote.
func setReady(q *netclassv1alpha1.NetworkQoS, generation int64) (*metav1.Condition, condition.Change) {
	acc := condition.Get(q.Status.Conditions, ConditionAccepted)
	var want metav1.Condition
	if acc.Status != metav1.ConditionTrue {
		want = condition.New(netclassv1alpha1.ConditionReady, metav1.ConditionFalse, netclassv1alpha1.ReasonInvalidConfig, "the NetworkQoS is invalid: "+acc.Message)
		q.Status.Status = StatusInvalid
	} else {
		want, q.Status.Status = fromNodes(q.Status.Nodes)
	}
	ch := condition.Set(&q.Status.Conditions, want, generation)
	return &want, ch
}

// fromNodes sums the nodes' reports up in a Ready condition and a status.status.
func fromNodes(nodes []netclassv1alpha1.NetworkQoSNodeStatus) (metav1.Condition, string) {
	var attachments int32
	var failed, leftOut []string
	for _, n := range nodes {
		attachments += n.Attachments
		switch {
		case n.Reason == netclassv1alpha1.ReasonApplyFailed:
			failed = append(failed, fmt.Sprintf("node %s: %s", n.Node, n.Message))
		case n.Message != "": // an Applied node names the rules it left out
			leftOut = append(leftOut, fmt.Sprintf("node %s: %s", n.Node, n.Message))
		}
	}
	switch {
	case len(failed) > 0:
		return condition.New(netclassv1alpha1.ConditionReady, metav1.ConditionFalse, netclassv1alpha1.ReasonApplyFailed,
			strings.Join(failed, "; ")), netclassv1alpha1.ReasonApplyFailed
	case len(nodes) > 0:
		msg := fmt.Sprintf("enforced on %d attachments on %d nodes", attachments, len(nodes))
		if len(leftOut) > 0 {
			msg += "; some rules left out: " + strings.Join(leftOut, "; ")
		}
		return condition.New(netclassv1alpha1.ConditionReady, metav1.ConditionTrue, netclassv1alpha1.ReasonApplied,
			msg), netclassv1alpha1.ReasonApplied
	default:
		return condition.New(netclassv1alpha1.ConditionReady, metav1.ConditionUnknown, netclassv1alpha1.ReasonPending,
			"no node runs an attachment it selects yet"), StatusPending
	}
}

// selected counts the netclass networks q selects: PodNetworks of provider netclass.dev
// and Networks of q's namespace, by the selector of each type (unset networkSelectors
// selects none: the default network only).
func (c *Controller) selected(q *netclassv1alpha1.NetworkQoS) (podNetworks, networks int) {
	pnSel, netSel := labels.Nothing(), labels.Nothing()
	for _, s := range q.Spec.NetworkSelectors {
		switch {
		case s.NetworkSelectionType == netclassv1alpha1.PodNetworks && s.PodNetworkSelector != nil:
			pnSel, _ = metav1.LabelSelectorAsSelector(s.PodNetworkSelector)
		case s.NetworkSelectionType == netclassv1alpha1.Networks && s.NetworkSelector != nil:
			netSel, _ = metav1.LabelSelectorAsSelector(s.NetworkSelector)
		}
	}
	pns, _ := c.podNetworks.List(pnSel)
	for _, pn := range pns {
		if pn.Spec.Provider == contract.Provider {
			podNetworks++
		}
	}
	nets, _ := c.networks.Networks(q.Namespace).List(netSel)
	return podNetworks, len(nets)
}
