//go:build testbed

package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	"github.com/netclass-dev/netclass/controller/condition"
	"github.com/netclass-dev/netclass/test/testbed"
)

// waitFor polls get until ok accepts the object, for at most waitTimeout.
func waitFor[T any](t *testing.T, e *env, what string, get func(context.Context) (T, error), ok func(T) (bool, string)) T {
	t.Helper()
	var last T
	ctx, cancel := context.WithTimeout(e.ctx, waitTimeout)
	defer cancel()
	testbed.Poll(t, ctx, 100*time.Millisecond, what, func(ctx context.Context) (bool, string, error) {
		obj, err := get(ctx)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return false, "not found", nil
			}
			return false, "", err
		}
		last = obj
		done, note := ok(obj)
		return done, note, nil
	})
	return last
}

// describe renders a condition for progress notes and messages.
func describe(conds []metav1.Condition, typ string) string {
	c := condition.Get(conds, typ)
	if c == nil {
		return typ + " absent"
	}
	return fmt.Sprintf("%s=%s/%s (gen %d): %s", c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message)
}

// hasCondition reports whether the condition has this status and reason, for generation.
func hasCondition(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string, gen int64) bool {
	c := condition.Get(conds, typ)
	return c != nil && c.Status == status && c.Reason == reason && c.ObservedGeneration == gen
}

func (e *env) podNetwork(t *testing.T, name string) func(context.Context) (*multinetworkv1.PodNetwork, error) {
	return func(ctx context.Context) (*multinetworkv1.PodNetwork, error) {
		return e.nc.MultinetworkV1().PodNetworks().Get(ctx, name, metav1.GetOptions{})
	}
}

// waitReady waits for a PodNetwork's Ready condition of the current generation.
func waitReady(t *testing.T, e *env, name string, status metav1.ConditionStatus, reason string) *multinetworkv1.PodNetwork {
	t.Helper()
	return waitFor(t, e, "PodNetwork "+name+" Ready "+string(status)+"/"+reason, e.podNetwork(t, name), func(p *multinetworkv1.PodNetwork) (bool, string) {
		return hasCondition(p.Status.Conditions, "Ready", status, reason, p.Generation), describe(p.Status.Conditions, "Ready")
	})
}

// waitEvent waits for an event from netclass.dev about the named object with this reason.
func waitEvent(t *testing.T, e *env, namespace, name, reason string) corev1.Event {
	t.Helper()
	return waitFor(t, e, "event "+reason+" for "+name, func(ctx context.Context) (corev1.Event, error) {
		list, err := e.kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
		if err != nil || len(list.Items) == 0 {
			return corev1.Event{}, err
		}
		return list.Items[0], nil
	}, func(ev corev1.Event) (bool, string) {
		return ev.Source.Component == contract.Provider, "source " + ev.Source.Component
	})
}

func (e *env) createPodNetwork(t *testing.T, name, provider, params string) {
	t.Helper()
	pn := &multinetworkv1.PodNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       multinetworkv1.PodNetworkSpec{Enabled: true, Provider: provider, Parameters: runtime.RawExtension{Raw: []byte(params)}},
	}
	if _, err := e.nc.MultinetworkV1().PodNetworks().Create(e.ctx, pn, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PodNetwork %s: %v", name, err)
	}
	t.Cleanup(func() { e.deleteAndWait(t, "PodNetwork "+name, e.podNetworkDeleter(name)) })
}

func (e *env) podNetworkDeleter(name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		err := e.nc.MultinetworkV1().PodNetworks().Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
}

// deleteAndWait calls del (which reports "gone") until the object is gone.
func (e *env) deleteAndWait(t *testing.T, what string, del func(context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		gone, err := del(ctx)
		if err != nil {
			t.Errorf("delete %s: %v", what, err)
			return
		}
		if gone {
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("%s not gone after a minute", what)
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// bridgeParams are valid parameters on a bridge of their own: two PodNetworks
// on one bridge would share a segment (SegmentConflict).
func bridgeParams(bridge string) string {
	return `{"type":"netclass-bridge","bridge":"` + bridge + `","ipam":{"type":"host-local","ranges":[[{"subnet":"10.99.1.0/24"}]]}}`
}

func (e *env) patchPodNetwork(t *testing.T, name, patch string) {
	t.Helper()
	if _, err := e.nc.MultinetworkV1().PodNetworks().Patch(e.ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch PodNetwork %s with %s: %v", name, patch, err)
	}
}

func client(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (e *env) waitNodeLabel(t *testing.T, label string, want bool) {
	t.Helper()
	waitFor(t, e, fmt.Sprintf("node label %s present=%v", label, want), func(ctx context.Context) (*corev1.Node, error) {
		return e.kube.CoreV1().Nodes().Get(ctx, e.node, metav1.GetOptions{})
	}, func(n *corev1.Node) (bool, string) {
		return (n.Labels[label] == "true") == want, fmt.Sprintf("labels %v", n.Labels)
	})
}
