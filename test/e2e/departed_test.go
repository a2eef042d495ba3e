//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// The slices of a node that leaves the cluster go with it: a second
// netclass-dra publishes for a Node object without a kubelet, then the node
// leaves (daemon gone, Node deleted) and its slices are removed.
func TestDepartedNodeSlices(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.PodNetworkKind)
	pn := "e2e-departed-" + harness.Unique(6)
	e.PodNetwork(t, pn, harness.BridgeParams("e2e"+harness.Unique(6), harness.RandomSubnet()), nil)
	e.WaitDevice(t, class, "", pn, true)

	ctx := testbed.Context(t, 3*time.Minute)
	node := "e2e-departed-" + harness.Unique(6)
	if _, err := e.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node,
		Labels: map[string]string{"netclass.dev/testbed": "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Node %s: %v", node, err)
	}
	t.Cleanup(func() {
		err := e.Kube.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete Node %s: %v", node, err)
		}
	})
	kubeconfig, err := e.KubeconfigFor(node)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	other := &harness.DRA{Bin: e.Bins.DRA, Kubeconfig: kubeconfig, Node: node, CNIDirs: e.Bins.CNIDirs,
		StateDir: filepath.Join(dir, "state"), LogPath: filepath.Join(dir, "log"),
		// Its own kubelet and runtime directories: nothing on this machine talks to it.
		// It does not own this host's devices either.
		Extra: []string{"--kubelet-dir=" + filepath.Join(dir, "kubelet"), "--nri-socket=" + filepath.Join(dir, "nri.sock"), "--node-devices=false"}}
	if _, err := other.Launch(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Kill() })

	slicesOf := func(ctx context.Context) (int, bool, error) {
		list, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: "spec.driver=" + contract.DriverName + ",spec.nodeName=" + node})
		if err != nil {
			return 0, false, err
		}
		published := false
		for _, s := range list.Items {
			for _, d := range s.Spec.Devices {
				if a := d.Attributes[contract.AttributeStdPodNetwork]; a.StringValue != nil && *a.StringValue == pn {
					published = true
				}
			}
		}
		return len(list.Items), published, nil
	}
	testbed.Poll(t, ctx, 200*time.Millisecond, "the other node's slice with "+pn, func(ctx context.Context) (bool, string, error) {
		n, published, err := slicesOf(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return published, fmt.Sprintf("%d slices; log:%s", n, other.Tail(5)), nil
	})

	if err := other.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := e.Kube.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete Node %s: %v", node, err)
	}
	testbed.Poll(t, ctx, 500*time.Millisecond, "the departed node's slices removed", func(ctx context.Context) (bool, string, error) {
		n, _, err := slicesOf(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		return n == 0, fmt.Sprintf("%d slices left", n), nil
	})
}
