package harness

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// NodeTimeout bounds a node's join or leave.
const NodeTimeout = 3 * time.Minute

// AddNode makes a node join the test bed (scripts/testbed/node.sh add; name ""
// for the next default name) and, in a Shared environment, starts a
// netclass-dra there and waits until it is ready. The node is in Env.Nodes
// (and its daemon in Env.DRAs) until RemoveNode, which the end of the test
// calls if the test did not.
func (e *Env) AddNode(t testing.TB, name string) bed.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), NodeTimeout)
	defer cancel()
	n, err := bed.AddNode(ctx, name)
	if err != nil {
		t.Fatalf("add a node: %v", err)
	}
	t.Cleanup(func() {
		if err := e.removeNode(n.Name); err != nil {
			t.Errorf("remove node %s: %v", n.Name, err)
		}
	})
	sharedMu.Lock()
	e.Nodes = append(e.Nodes, n)
	sharedMu.Unlock()
	if e.DRA == nil { // Bare: netclass runs as the package deployed it
		return n
	}
	kubeconfig, err := e.KubeconfigFor(n.Name)
	if err != nil {
		t.Fatal(err)
	}
	d := &DRA{Bin: e.Bins.DRA, Kubeconfig: kubeconfig, Node: n.Name, On: n, CNIDirs: e.Bins.CNIDirs,
		StateDir: filepath.Join(e.dir, "state-"+n.Name), LogPath: filepath.Join(e.dir, "netclass-dra-"+n.Name+".log")}
	sharedMu.Lock()
	e.DRAs = append(e.DRAs, d)
	sharedMu.Unlock()
	if err := d.Start(time.Minute); err != nil {
		t.Fatalf("netclass-dra on the new node %s: %v", n.Name, err)
	}
	return n
}

// RemoveNode makes a node leave the test bed: the pods on it are deleted
// while its netclass-dra still serves it (their claims are unprepared), the
// daemon stops, then scripts/testbed/node.sh remove drains what is left,
// stops its kubelet and containerd, deletes its Node object and removes its
// namespaces; the netclass.dev slices of the node that are left are deleted.
// Node 1 cannot leave.
func (e *Env) RemoveNode(t testing.TB, name string) {
	t.Helper()
	if err := e.removeNode(name); err != nil {
		t.Fatalf("remove node %s: %v", name, err)
	}
}

func (e *Env) removeNode(name string) error {
	if name == e.Node {
		return errors.New("node 1 leaves only with the test bed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), NodeTimeout)
	defer cancel()
	errs := []error{e.deletePodsOn(ctx, name)}
	if d := e.DRAOn(name); d != nil {
		errs = append(errs, d.Stop())
	}
	errs = append(errs, bed.RemoveNode(ctx, name))
	sharedMu.Lock()
	e.Nodes = slices.DeleteFunc(e.Nodes, func(n bed.Node) bool { return n.Name == name })
	e.DRAs = slices.DeleteFunc(e.DRAs, func(d *DRA) bool { return d.Node == name })
	sharedMu.Unlock()
	list, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=netclass.dev,spec.nodeName=" + name})
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, s := range list.Items {
		if err := e.Kube.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete ResourceSlice %s of node %s: %w", s.Name, name, err))
		}
	}
	return errors.Join(errs...)
}

// deletePodsOn deletes every pod bound to the node and waits until they are gone.
func (e *Env) deletePodsOn(ctx context.Context, node string) error {
	pods := e.Kube.CoreV1().Pods(metav1.NamespaceAll)
	onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}
	list, err := pods.List(ctx, onNode)
	if err != nil {
		return err
	}
	for _, p := range list.Items {
		err := e.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(1))})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete pod %s/%s on node %s: %w", p.Namespace, p.Name, node, err)
		}
	}
	for {
		list, err := pods.List(ctx, onNode)
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pods on node %s not gone: %w (%v)", node, ctx.Err(), err)
		case <-time.After(250 * time.Millisecond): // polling the API server for the pods' deletion
		}
	}
}

// WaitNoSlices waits until no netclass.dev ResourceSlice names the node.
func (e *Env) WaitNoSlices(t testing.TB, node string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, WaitTimeout), 250*time.Millisecond, "no netclass.dev slices of node "+node,
		func(ctx context.Context) (bool, string, error) {
			list, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=netclass.dev,spec.nodeName=" + node})
			if err != nil {
				return false, err.Error(), nil
			}
			return len(list.Items) == 0, fmt.Sprintf("%d slices", len(list.Items)), nil
		})
}
