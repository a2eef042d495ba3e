//go:build testbed

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/nadfile"
	"github.com/netclass-dev/netclass/conf/netspec"
	"github.com/netclass-dev/netclass/controller/nad"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/repo"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// genNADDir is where netclass-nad looks by default (its stateDir
// /var/lib/netclass + /nad): the test's daemons render there.
const genNADDir = nadfile.DefaultStateDir + "/" + nadfile.Subdir

// genMultus runs Multus in front of the primary network for the test: the
// bed's when it runs, else started here and stopped at the end (after what
// the test registers later: its pods go first, their DEL through Multus).
func genMultus(t *testing.T) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "testbed", "multus.sh")
	if exec.Command("bash", script, "status").Run() == nil {
		return
	}
	start := time.Now()
	if out, err := exec.Command("bash", script, "start").CombinedOutput(); err != nil {
		t.Fatalf("start Multus: %v\n%s", err, out)
	}
	t.Logf("Multus started in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "stop").CombinedOutput(); err != nil {
			t.Errorf("stop Multus: %v\n%s", err, out)
		}
	})
}

// genRenderHere restarts the daemons rendering the NAD lists where
// netclass-nad looks by default (the bed's daemons keep their state in the
// test's directory), and at the end puts them and the nodes back.
func genRenderHere(t *testing.T, e *harness.Env) {
	t.Helper()
	var created []string
	for _, n := range e.Nodes {
		for _, d := range []string{nadfile.DefaultStateDir, nadfile.DataDir} {
			if _, err := os.Stat(n.HostPath(d)); os.IsNotExist(err) {
				created = append(created, n.HostPath(d))
			}
		}
		for _, d := range []string{genNADDir, nadfile.CacheDir(nadfile.DefaultStateDir)} {
			if _, err := os.Stat(n.HostPath(d)); err == nil {
				t.Fatalf("%s exists on %s: something else renders NAD lists there", d, n.Name)
			}
			created = append(created, n.HostPath(d))
		}
	}
	t.Cleanup(func() {
		e.RestartDRAsWith(t)
		for _, p := range created {
			if err := os.RemoveAll(p); err != nil {
				t.Errorf("remove %s: %v", p, err)
			}
		}
	})
	e.RestartDRAsWith(t, "--nad-dir="+genNADDir)
}

// genWaitFile waits for the node's rendered list of the network.
func genWaitFile(t *testing.T, n bed.Node, ref nadfile.Ref) {
	t.Helper()
	file := n.HostPath(nadfile.Path(nadfile.DefaultStateDir, ref))
	testbed.Poll(t, testbed.Context(t, time.Minute), 100*time.Millisecond, "rendered list of "+ref.String()+" on "+n.Name, func(context.Context) (bool, string, error) {
		_, err := os.Stat(file)
		return err == nil, fmt.Sprint(err), nil
	})
}

func genGetNAD(ctx context.Context, dyn dynamic.Interface, ns, name string) (*unstructured.Unstructured, error) {
	return dyn.Resource(nad.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// genStatus returns the pod's network-status entry of ifname.
func genStatus(t *testing.T, pod *corev1.Pod, ifname string) (name string, ips []string) {
	t.Helper()
	var list []struct {
		Name      string   `json:"name"`
		Interface string   `json:"interface"`
		IPs       []string `json:"ips"`
	}
	raw := pod.Annotations["k8s.v1.cni.cncf.io/network-status"]
	if err := json.Unmarshal([]byte(raw), &list); err != nil {
		t.Fatalf("pod %s: network-status %q: %v", pod.Name, raw, err)
	}
	for _, s := range list {
		if s.Interface == ifname {
			return s.Name, s.IPs
		}
	}
	t.Fatalf("pod %s: no %s in network-status %s", pod.Name, ifname, raw)
	return "", nil
}

// inBlock fails unless addr is in the node's block of subnet.
func inBlock(t *testing.T, e *harness.Env, cluster string, n bed.Node, subnet, addr string) {
	t.Helper()
	nn := nodeNetworkOf(t, e, cluster, n.Name)
	if nn.Status.NodeIndex == nil {
		t.Fatalf("NodeNetwork of %s on %s has no node index", cluster, n.Name)
	}
	first, last, err := netspec.NodeBlock(netip.MustParsePrefix(subnet), int(*nn.Status.NodeIndex))
	a := netip.MustParseAddr(addr)
	if err != nil || a.Less(first) || last.Less(a) {
		t.Errorf("%s on %s is not in the node's block %s-%s of %s (%v)", addr, n.Name, first, last, subnet, err)
	}
}

// TestMultusGeneratedNAD: a VXLAN Network across the two nodes gets its
// NetworkAttachmentDefinition from netclass-controller; pods on both nodes
// asking for it through k8s.v1.cni.cncf.io/networks get net1 (netclass-nad
// running what each node's netclass-dra rendered) with an address of their
// node's block, reach each other across the nodes, and network-status says
// what they have; deleting the Network deletes the NAD, which stays until
// its pods are gone. A netclass-bridge PodNetwork listing the namespace in
// netclass.dev/nad-namespaces gets its NAD there too (pods a and c on node
// 1 reach each other over it as net2), deleted once the list drops the
// namespace and its last pod is gone. Pod c's network-status moved to the
// PodNetwork's NAD of another namespace (same network, same CNI list) does
// not move its interface there: its record names the NAD it was made
// through.
func TestMultusGeneratedNAD(t *testing.T) {
	e := harness.Shared(t)
	n1, n2 := twoNodes(t, e)
	genRenderHere(t, e)
	genMultus(t)
	dyn, err := dynamic.NewForConfig(e.Rest)
	if err != nil {
		t.Fatal(err)
	}
	class := e.Class(t, harness.NetworkKind)
	pnClass := e.Class(t, harness.PodNetworkKind)
	cluster := autoVXLANCluster(t, e)
	pn, bridge := "e2e-nadpn-"+harness.Unique(5), "ncnp"+harness.Unique(5)
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, harness.RandomSubnet()), map[string]string{"tier": "storage"}, bridge)
	ns := testbed.Namespace(t, e.Kube)
	subnet := harness.RandomSubnet()
	e.Network(t, ns, "vx", cluster, harness.RandomVNI(), subnet)
	start := time.Now()
	for _, n := range []bed.Node{n1, n2} {
		e.WaitDeviceOn(t, n.Name, class, ns, "vx", true)
		genWaitFile(t, n, nadfile.Ref{Namespace: ns, Name: "vx"})
	}
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, "NAD "+ns+"/vx", func(ctx context.Context) (bool, string, error) {
		u, err := genGetNAD(ctx, dyn, ns, "vx")
		if apierrors.IsNotFound(err) {
			return false, "not yet", nil
		}
		return err == nil && nad.Owned(u), fmt.Sprint(u), err
	})
	t.Logf("NAD generated and lists rendered on both nodes %v after the Network", time.Since(start).Round(time.Millisecond))
	genPodNetworkNAD(t, e, dyn, pn, ns)
	e.WaitDeviceOn(t, n1.Name, pnClass, "", pn, true)
	genWaitFile(t, n1, nadfile.Ref{Name: pn})
	var pods []*corev1.Pod
	for _, p := range []struct{ name, node, networks string }{
		{"a", n1.Name, "vx@net1, " + pn + "@net2"}, {"b", n2.Name, "vx@net1"}, {"c", n1.Name, pn + "@net2"},
	} {
		pod := testbed.OnNode(testbed.Pod(ns, p.name, "sleep", "3600"), p.node)
		pod.Annotations = map[string]string{nad.AnnotationNetworks: p.networks}
		pods = append(pods, pod)
	}
	e.RunPods(t, pods...)
	addr := map[string]string{}
	for i, p := range []string{"a", "b"} {
		pod, err := e.Kube.CoreV1().Pods(ns).Get(testbed.Context(t, time.Minute), p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		name, ips := genStatus(t, pod, "net1")
		ifc := e.MustIface(t, ns, p, "net1")
		if name != ns+"/vx" || len(ips) != 1 || len(ifc.CIDRs) != 1 || strings.Split(ifc.CIDRs[0], "/")[0] != ips[0] {
			t.Fatalf("pod %s: network-status %s %v, net1 has %v", p, name, ips, ifc.CIDRs)
		}
		addr[p] = ips[0]
		inBlock(t, e, cluster, []bed.Node{n1, n2}[i], subnet, ips[0])
		t.Logf("pod %s on %s: net1 %s", p, pod.Spec.NodeName, ifc.CIDRs[0])
	}
	e.Ping(t, ns, "a", "net1", addr["b"])
	e.Ping(t, ns, "b", "net1", addr["a"])
	c := e.MustIface(t, ns, "c", "net2")
	e.Ping(t, ns, "a", "net2", strings.Split(c.CIDRs[0], "/")[0])
	genMovedToAnotherNamespace(t, e, dyn, n1, pn, ns)
	genDeleteNetwork(t, e, dyn, ns)
	genDropNamespace(t, e, dyn, pn, ns)
}

// genMovedToAnotherNamespace: the PodNetwork's NAD generated in another
// namespace too, pod c's network-status edited to name that NAD for net2
// (as whoever may update the pod can) leaves net2 on the NAD it was made
// through, listed by node 1's agent as waiting for its network-status.
func genMovedToAnotherNamespace(t *testing.T, e *harness.Env, dyn dynamic.Interface, n bed.Node, pn, ns string) {
	t.Helper()
	other := testbed.Namespace(t, e.Kube)
	genAnnotate(t, e, pn, ns+","+other)
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, "NAD "+other+"/"+pn, func(ctx context.Context) (bool, string, error) {
		u, err := genGetNAD(ctx, dyn, other, pn)
		if apierrors.IsNotFound(err) {
			return false, "not yet", nil
		}
		return err == nil && nad.Owned(u), fmt.Sprint(u), err
	})
	dra := e.DRAOn(n.Name)
	dra.WaitAgent(t, "c's net2 on "+ns+"/"+pn, agentLists(ns+"/c", "net2", false, ns+"/"+pn))
	editStatus(t, e, getPod(t, e, ns, "c"), func(entries []map[string]any) []map[string]any {
		for _, en := range entries {
			if en["interface"] == "net2" {
				en["name"] = other + "/" + pn
			}
		}
		return entries
	})
	dra.WaitAgent(t, "c's net2 waiting for its network-status, on "+ns+"/"+pn, agentLists(ns+"/c", "net2", true, ns+"/"+pn))
}

// genPodNetworkNAD lists the namespace in the PodNetwork's
// netclass.dev/nad-namespaces and waits for its NAD there, labelled as the
// PodNetwork is.
func genPodNetworkNAD(t *testing.T, e *harness.Env, dyn dynamic.Interface, pn, ns string) {
	t.Helper()
	genAnnotate(t, e, pn, ns)
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, "NAD "+ns+"/"+pn, func(ctx context.Context) (bool, string, error) {
		u, err := genGetNAD(ctx, dyn, ns, pn)
		if apierrors.IsNotFound(err) {
			return false, "not yet", nil
		}
		return err == nil && nad.Owned(u) && u.GetLabels()["tier"] == "storage", fmt.Sprint(u), err
	})
}

// genAnnotate sets (ns != "") or removes the PodNetwork's netclass.dev/nad-namespaces.
func genAnnotate(t *testing.T, e *harness.Env, pn, ns string) {
	t.Helper()
	value := "null"
	if ns != "" {
		value = fmt.Sprintf("%q", ns)
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, nad.AnnotationNamespaces, value)
	if _, err := e.NC.MultinetworkV1().PodNetworks().Patch(testbed.Context(t, time.Minute), pn, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("annotate PodNetwork %s: %v", pn, err)
	}
}

// genDropNamespace removes the namespace from the PodNetwork's list: its
// NAD is deleted, held while pod c names it, and gone once c is.
func genDropNamespace(t *testing.T, e *harness.Env, dyn dynamic.Interface, pn, ns string) {
	t.Helper()
	genAnnotate(t, e, pn, "")
	genReleased(t, e, dyn, ns, pn, "c")
}

// genDeleteNetwork deletes the Network: its NAD is deleted but stays while
// pods a and b name it, and goes once they are gone (a's net2 goes with a);
// the Network, and its VNI, stay while the NAD does.
func genDeleteNetwork(t *testing.T, e *harness.Env, dyn dynamic.Interface, ns string) {
	t.Helper()
	if err := e.NC.NetclassV1alpha1().Networks(ns).Delete(testbed.Context(t, time.Minute), "vx", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, "Network vx deleting, held by its NAD", func(ctx context.Context) (bool, string, error) {
		n, err := e.NC.NetclassV1alpha1().Networks(ns).Get(ctx, "vx", metav1.GetOptions{})
		if err != nil {
			return false, "", fmt.Errorf("the Network went while pods attached through its NAD name it: %w", err)
		}
		c := meta.FindStatusCondition(n.Status.Conditions, ncv1.ConditionInUse)
		return n.DeletionTimestamp != nil && c != nil && strings.Contains(c.Message, "NetworkAttachmentDefinition "+ns+"/vx"), fmt.Sprint(c), nil
	})
	genReleased(t, e, dyn, ns, "vx", "a", "b")
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, "Network vx gone after its NAD", func(ctx context.Context) (bool, string, error) {
		_, err := e.NC.NetclassV1alpha1().Networks(ns).Get(ctx, "vx", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still there", err
	})
}

// genReleased: the NAD is being deleted but stays while the pods name it,
// and goes once they are deleted.
func genReleased(t *testing.T, e *harness.Env, dyn dynamic.Interface, ns, name string, pods ...string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, time.Minute), 200*time.Millisecond, "NAD "+name+" deleting, held", func(ctx context.Context) (bool, string, error) {
		u, err := genGetNAD(ctx, dyn, ns, name)
		if err != nil {
			return false, "", fmt.Errorf("the NAD went while its pods name it: %w", err)
		}
		return u.GetDeletionTimestamp() != nil, fmt.Sprint(u.GetFinalizers()), nil
	})
	for _, p := range pods {
		if err := e.Kube.CoreV1().Pods(ns).Delete(testbed.Context(t, time.Minute), p, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	testbed.Poll(t, testbed.Context(t, 2*time.Minute), 200*time.Millisecond, "NAD "+name+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := genGetNAD(ctx, dyn, ns, name)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still there", err
	})
	t.Logf("NAD %s gone %v after its pods were deleted", name, time.Since(start).Round(time.Millisecond))
}
