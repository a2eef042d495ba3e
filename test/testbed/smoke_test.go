//go:build testbed

package testbed_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/exec"

	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// Every node is Ready and has what netclass-dra needs where a real node has it: the kubelet's
// DRA plugin and registration directories and containerd's NRI socket (on nodes 2..N, bound
// there by their mount namespace). Its InternalIP is the address of its underlay interface,
// which the node's own /sys lists.
func TestNodesReadyForDRAAndNRI(t *testing.T) {
	c := testbed.Client(t)
	nodes := testbed.Nodes(t, c)
	if len(nodes) < 2 {
		t.Errorf("the test bed has %d node(s); make testbed-up starts TESTBED_NODES (default 2)", len(nodes))
	}
	for _, n := range nodes {
		t.Run(n.Name, func(t *testing.T) {
			for _, dir := range []string{testbed.KubeletDir + "/plugins", testbed.KubeletDir + "/plugins_registry"} {
				fi, err := os.Stat(n.HostPath(dir))
				if err != nil || !fi.IsDir() {
					t.Errorf("kubelet directory %s (%s here): want a directory, got %v (err %v)", dir, n.HostPath(dir), fi, err)
				}
			}
			fi, err := os.Stat(n.HostPath(testbed.NRISocket))
			if err != nil || fi.Mode()&os.ModeSocket == 0 {
				t.Errorf("NRI socket %s (%s here): want a socket, got %v (err %v)", testbed.NRISocket, n.HostPath(testbed.NRISocket), fi, err)
			}
			node, err := c.CoreV1().Nodes().Get(testbed.Context(t, 30*time.Second), n.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get node %s: %v", n.Name, err)
			}
			var internal []string
			for _, a := range node.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					internal = append(internal, a.Address)
				}
			}
			if len(internal) != 1 || internal[0] != n.IP {
				t.Errorf("node %s: InternalIP %v, want %s", n.Name, internal, n.IP)
			}
			ctx := testbed.Context(t, 30*time.Second)
			addrs, err := n.Output(ctx, "ip", "-o", "-4", "addr", "show", "dev", n.UnderlayIf)
			if err != nil || !strings.Contains(addrs, " "+n.UnderlayAddr+" ") {
				t.Errorf("node %s: underlay %s has %q (err %v), want %s", n.Name, n.UnderlayIf, addrs, err, n.UnderlayAddr)
			}
			if _, err := n.Output(ctx, "test", "-e", "/sys/class/net/"+n.UnderlayIf); err != nil {
				t.Errorf("node %s: its /sys does not show %s: %v", n.Name, n.UnderlayIf, err)
			}
		})
	}
}

// On every node a pod of the local image runs on the node's primary network, its log line
// appears, exec works through the API server and the node's kubelet, and the pod has no route
// off the test bed.
func TestPodRunsLogsAndExec(t *testing.T) {
	c := testbed.Client(t)
	for _, n := range testbed.Nodes(t, c) {
		t.Run(n.Name, func(t *testing.T) { podRunsLogsAndExec(t, c, n) })
	}
}

func podRunsLogsAndExec(t *testing.T, c kubernetes.Interface, n bed.Node) {
	cfg := testbed.RestConfig(t)
	ns := testbed.Namespace(t, c)
	ctx := testbed.Context(t, 2*time.Minute)

	const ready = "netclass-testbed-smoke-ready"
	pod := testbed.OnNode(testbed.Pod(ns, "smoke", "/bin/sh", "-c", "echo "+ready+"; exec sleep 3600"), n.Name)
	if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/smoke: %v", ns, err)
	}
	running := testbed.WaitForPodRunning(t, c, ns, "smoke", time.Minute)
	if running.Spec.NodeName != n.Name || running.Status.HostIP != n.IP {
		t.Errorf("pod on node %q with host IP %q, want %s and %s", running.Spec.NodeName, running.Status.HostIP, n.Name, n.IP)
	}
	if _, subnet, err := net.ParseCIDR(n.PodSubnet); err != nil || !subnet.Contains(net.ParseIP(running.Status.PodIP)) {
		t.Errorf("pod IP %q: want an address of node %s's pod subnet %s (%v)", running.Status.PodIP, n.Name, n.PodSubnet, err)
	}

	testbed.Poll(t, ctx, 250*time.Millisecond, "log line of pod "+ns+"/smoke",
		func(ctx context.Context) (bool, string, error) {
			logs, err := testbed.Logs(ctx, c, ns, "smoke", "main")
			if err != nil {
				return false, err.Error(), nil
			}
			return strings.Contains(logs, ready), fmt.Sprintf("log %q", logs), nil
		})

	// PID 1 of the container is its command, which exec'ed sleep.
	stdout, stderr, err := testbed.Exec(ctx, cfg, ns, "smoke", "main", "/bin/sh", "-c", "echo exec-ok; cat /proc/1/comm")
	if err != nil {
		t.Fatalf("exec: %v (stderr %q)", err, stderr)
	}
	if want := "exec-ok\nsleep\n"; stdout != want {
		t.Errorf("exec stdout %q: want %q", stdout, want)
	}

	_, _, err = testbed.Exec(ctx, cfg, ns, "smoke", "main", "/bin/sh", "-c", "exit 3")
	var exitErr exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitStatus() != 3 {
		t.Errorf("exec of a command exiting 3: want an exit error with status 3, got %v", err)
	}

	routes, stderr, err := testbed.Exec(ctx, cfg, ns, "smoke", "main", "ip", "route", "show")
	if err != nil {
		t.Fatalf("exec ip route: %v (stderr %q)", err, stderr)
	}
	if !strings.Contains(routes, "dev eth0") {
		t.Errorf("pod routes %q: want the primary network's route on eth0", routes)
	}
	if strings.Contains(routes, "default") {
		t.Errorf("pod routes %q: the primary network must not give pods a default route", routes)
	}
}

// A ResourceSlice published by hand for a fake driver, a DeviceClass and a ResourceClaim: the
// real scheduler allocates the device to the claim of a pod and binds the pod to the node, and
// the allocation goes when the pod goes. Nothing runs the fake driver on the node, so the pod
// itself never starts; that is not what is tested.
func TestSchedulerAllocatesHandMadeSlice(t *testing.T) {
	const driver = "testbed-smoke.netclass.dev"
	c := testbed.Client(t)
	node := testbed.NodeName(t, c)
	ns := testbed.Namespace(t, c)
	ctx := testbed.Context(t, 3*time.Minute)

	// The attribute ties the class to this test's device only, whatever else is published.
	class, err := c.ResourceV1().DeviceClasses().Create(ctx, &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "testbed-smoke-"},
		Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: fmt.Sprintf(`device.driver == %q && device.attributes[%q].?smokeNamespace.orValue("") == %q`, driver, driver, ns),
			}}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create device class: %v", err)
	}
	cleanup(t, "device class "+class.Name, func(ctx context.Context) error {
		return c.ResourceV1().DeviceClasses().Delete(ctx, class.Name, metav1.DeleteOptions{})
	})

	slice, err := c.ResourceV1().ResourceSlices().Create(ctx, &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "testbed-smoke-"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			Pool:     resourcev1.ResourcePool{Name: ns, Generation: 1, ResourceSliceCount: 1},
			NodeName: &node,
			Devices: []resourcev1.Device{{
				Name: "dev-0",
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
					"smokeNamespace": {StringValue: &ns},
				},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create resource slice: %v", err)
	}
	cleanup(t, "resource slice "+slice.Name, func(ctx context.Context) error {
		return c.ResourceV1().ResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{})
	})

	claim, err := c.ResourceV1().ResourceClaims(ns).Create(ctx, &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{
				Name:    "dev",
				Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name},
			}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create resource claim: %v", err)
	}

	pod := testbed.Pod(ns, "smoke", "/bin/sh", "-c", "exec sleep 3600")
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "dev", ResourceClaimName: &claim.Name}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "dev"}}
	pod, err = c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}

	var allocated *resourcev1.ResourceClaim
	testbed.Poll(t, ctx, 250*time.Millisecond, "scheduler allocating claim "+ns+"/smoke",
		func(ctx context.Context) (bool, string, error) {
			cl, err := c.ResourceV1().ResourceClaims(ns).Get(ctx, "smoke", metav1.GetOptions{})
			if err != nil {
				return false, "", fmt.Errorf("get claim %s/smoke: %w", ns, err)
			}
			allocated = cl
			if cl.Status.Allocation == nil {
				return false, "not allocated; pod events: " + testbed.Events(ctx, c, ns, "smoke"), nil
			}
			return true, "", nil
		})
	results := allocated.Status.Allocation.Devices.Results
	if len(results) != 1 {
		t.Fatalf("allocation of claim %s/smoke: want 1 device, got %+v", ns, results)
	}
	if r := results[0]; r.Request != "dev" || r.Driver != driver || r.Pool != ns || r.Device != "dev-0" {
		t.Errorf("allocation of claim %s/smoke: want request dev → %s/%s/dev-0, got %+v", ns, driver, ns, r)
	}
	reserved := false
	for _, ref := range allocated.Status.ReservedFor {
		reserved = reserved || (ref.Resource == "pods" && ref.Name == pod.Name && ref.UID == pod.UID)
	}
	if !reserved {
		t.Errorf("claim %s/smoke: want it reserved for pod %s, got %+v", ns, pod.Name, allocated.Status.ReservedFor)
	}
	bound, err := c.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get pod %s/%s: %v", ns, pod.Name, err)
	}
	if bound.Spec.NodeName != node {
		t.Errorf("pod %s/%s: want it bound to node %s, got %q", ns, pod.Name, node, bound.Spec.NodeName)
	}

	if err := c.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s/%s: %v", ns, pod.Name, err)
	}
	testbed.Poll(t, ctx, 250*time.Millisecond, "claim "+ns+"/smoke deallocated after its pod went",
		func(ctx context.Context) (bool, string, error) {
			cl, err := c.ResourceV1().ResourceClaims(ns).Get(ctx, "smoke", metav1.GetOptions{})
			if err != nil {
				return false, "", fmt.Errorf("get claim %s/smoke: %w", ns, err)
			}
			note := fmt.Sprintf("allocated %v, reserved for %d", cl.Status.Allocation != nil, len(cl.Status.ReservedFor))
			return cl.Status.Allocation == nil && len(cl.Status.ReservedFor) == 0, note, nil
		})
}

// cleanup deletes a cluster-scoped object when the test ends; "not found" is fine.
func cleanup(t *testing.T, what string, del func(context.Context) error) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := del(ctx); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete %s: %v", what, err)
		}
	})
}
