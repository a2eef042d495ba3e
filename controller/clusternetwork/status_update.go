package clusternetwork

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/netclass-dev/netclass/api/contract"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/controller/condition"
)

// updateStatus writes counts and the Ready condition when they differ.
func (c *Controller) updateStatus(ctx context.Context, cn *netclassv1alpha1.ClusterNetwork, sum Summary, ready metav1.Condition) error {
	upd := cn.DeepCopy()
	ch := condition.Set(&upd.Status.Conditions, ready, cn.Generation)
	upd.Status.Nodes, upd.Status.ReadyNodes = sum.Nodes, sum.ReadyNodes
	upd.Status.ObservedGeneration = cn.Generation
	if !ch.Updated && upd.Status.Nodes == cn.Status.Nodes && upd.Status.ReadyNodes == cn.Status.ReadyNodes &&
		upd.Status.ObservedGeneration == cn.Status.ObservedGeneration {
		return nil
	}
	out, err := c.client.NetclassV1alpha1().ClusterNetworks().UpdateStatus(ctx, upd, metav1.UpdateOptions{FieldManager: contract.FieldManager})
	if err != nil {
		return c.failed(cn, fmt.Errorf("update status: %w", err))
	}
	klog.FromContext(ctx).V(2).Info("Updated status", "nodes", sum.Nodes, "readyNodes", sum.ReadyNodes, "ready", ready.Reason)
	if ch.Transitioned {
		typ := corev1.EventTypeNormal
		if ready.Status == metav1.ConditionFalse {
			typ = corev1.EventTypeWarning
		}
		c.recorder.Event(out, typ, ready.Reason, ready.Message)
	}
	return nil
}

// syncLabels sets the node label of ClusterNetwork name on the nodes in ready and removes it
// from every other node. cn is nil once the ClusterNetwork is gone (no events then).
func (c *Controller) syncLabels(ctx context.Context, cn *netclassv1alpha1.ClusterNetwork, name string, ready map[string]bool) error {
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	key := NodeLabel(name)
	var errs []error
	for _, n := range nodes {
		has := n.Labels[key] == "true"
		want := ready[n.Name]
		if has == want {
			continue
		}
		if err := c.patchLabel(ctx, n.Name, key, want); err != nil {
			errs = append(errs, err)
			continue
		}
		if cn != nil {
			reason, verb := EventNodeLabeled, "Labelled"
			if !want {
				reason, verb = EventNodeUnlabeled, "Unlabelled"
			}
			c.recorder.Eventf(cn, corev1.EventTypeNormal, reason, "%s node %s with %s", verb, n.Name, key)
		}
	}
	if len(errs) > 0 {
		if cn != nil {
			c.recorder.Eventf(cn, corev1.EventTypeWarning, EventSyncFailed, "Labelling nodes failed: %v", errors.Join(errs...))
		}
		return fmt.Errorf("clusternetwork %s: node labels: %w", name, errors.Join(errs...))
	}
	return nil
}

// patchLabel adds (value "true") or removes a label with a JSON merge patch.
func (c *Controller) patchLabel(ctx context.Context, node, key string, set bool) error {
	value := "null"
	if set {
		value = `"true"`
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, key, value)
	_, err := c.kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: contract.FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("patch label %s of node %s: %w", key, node, err)
	}
	return nil
}
