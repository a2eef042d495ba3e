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
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/repo"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// Multus's names (k8s.v1.cni.cncf.io).
var nadGVR = schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}

const (
	annotationNetworks      = "k8s.v1.cni.cncf.io/networks"
	annotationNetworkStatus = "k8s.v1.cni.cncf.io/network-status"
	// pluginRecords is the netclass plugins' default dataDir (README.md,
	// "netclass-bridge"): the records of the attachments Multus makes.
	pluginRecords = "/var/lib/cni/netclass"
)

// startMultus makes sure Multus runs in front of the primary network on
// every node: the bed's own when up.sh started it (left running), else
// started here and stopped at the end, after everything the test
// registers later (its namespace and pods go first, their DEL through
// Multus). It fails, never skips, when it cannot.
func startMultus(t *testing.T) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "testbed", "multus.sh")
	if exec.Command("bash", script, "status").Run() == nil {
		t.Log("Multus already runs on every node (the bed's)")
		return
	}
	start := time.Now()
	if out, err := exec.Command("bash", script, "start").CombinedOutput(); err != nil {
		t.Fatalf("start Multus (%s start): %v\n%s", script, err, out)
	}
	t.Logf("Multus started on every node in %v", time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if out, err := exec.Command("bash", script, "stop").CombinedOutput(); err != nil {
			t.Errorf("stop Multus: %v\n%s", err, out)
		}
	})
}

// bridgeNAD makes a namespace with a NetworkAttachmentDefinition "ncbr" of
// a netclass-bridge network of its own on node n (names from what, an
// address range of subnet), and removes what the network leaves on the
// node at the end. It returns the namespace, the plugin's network name
// (its records' directory) and the IPAM directory.
func bridgeNAD(t *testing.T, e *harness.Env, n bed.Node, what, subnet string) (ns, network, ipamDir string) {
	t.Helper()
	id := fmt.Sprintf("%05d", time.Now().UnixNano()%100000)
	network, bridge := "e2e-"+what+"-"+id, "nc"+what[:2]+id
	ipamDir = "/var/lib/cni/netclass-" + network
	// registered before the namespace: its pods go first
	t.Cleanup(func() { removeNADState(t, n, bridge, network, ipamDir) })
	ns = testbed.Namespace(t, e.Kube)
	createNAD(t, e, ns, "ncbr", map[string]any{
		"cniVersion": "1.0.0", "name": network, "type": "netclass-bridge", "bridge": bridge,
		"ipam": map[string]any{"type": "host-local", "dataDir": ipamDir, "ranges": []any{[]any{map[string]any{"subnet": subnet}}}},
	})
	return ns, network, ipamDir
}

// createNAD creates a NetworkAttachmentDefinition with the CNI config;
// the namespace's deletion removes it.
func createNAD(t *testing.T, e *harness.Env, ns, name string, config map[string]any) {
	t.Helper()
	raw, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.Rest)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"config": string(raw)},
	}}
	if _, err := dyn.Resource(nadGVR).Namespace(ns).Create(testbed.Context(t, time.Minute), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkAttachmentDefinition %s/%s: %v", ns, name, err)
	}
}

// networkStatus is one entry of Multus's network-status annotation.
type networkStatus struct {
	Name      string   `json:"name"`
	Interface string   `json:"interface"`
	IPs       []string `json:"ips"`
	MAC       string   `json:"mac"`
}

// statusOf returns the pod's network-status entry for the interface.
func statusOf(t *testing.T, pod *corev1.Pod, ifname string) networkStatus {
	t.Helper()
	var list []networkStatus
	if err := json.Unmarshal([]byte(pod.Annotations[annotationNetworkStatus]), &list); err != nil {
		t.Fatalf("pod %s/%s: annotation %s: %v (%q)", pod.Namespace, pod.Name, annotationNetworkStatus, err, pod.Annotations[annotationNetworkStatus])
	}
	for _, s := range list {
		if s.Interface == ifname {
			return s
		}
	}
	t.Fatalf("pod %s/%s: no %s entry in %s: %s", pod.Namespace, pod.Name, ifname, annotationNetworkStatus, pod.Annotations[annotationNetworkStatus])
	return networkStatus{}
}

// nadRecord reads the netclass plugin's record of the pod's interface:
// the one with the interface's address (cidr).
func nadRecord(t *testing.T, n bed.Node, network, ifname, cidr string) *attach.Record {
	t.Helper()
	recs, err := attach.Store{Dir: n.HostPath(pluginRecords)}.List(network)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.IfName == ifname && slices.Contains(r.Addresses, cidr) {
			return r
		}
	}
	t.Fatalf("no record of %s %s in %s/%s (%d records)", ifname, cidr, n.HostPath(pluginRecords), network, len(recs))
	return nil
}

// TestMultusHandWrittenNAD: under real Multus (scripts/testbed/multus.sh), on
// node 2 (its daemon in the node's namespaces), a
// hand-written NetworkAttachmentDefinition with a netclass-bridge config
// attaches two pods that ask for it with k8s.v1.cni.cncf.io/networks and
// cni-args QoS (args.cni.qos): network-status names the addresses the pods
// have; DSCP 46 is on their packets on the wire as the peer receives them
// (set at the sender's port on the host), the sender's egressRate caps a
// TCP stream; deleting the pods
// leaves no host end, no address reservation and no plugin record.
func TestMultusHandWrittenNAD(t *testing.T) {
	e := harness.Shared(t)
	startMultus(t)
	n := e.Nodes[len(e.Nodes)-1] // node 2: Multus in a node's own namespaces
	ns, network, ipamDir := bridgeNAD(t, e, n, "multus", "10.77.0.0/24")
	const rate = 20_000_000
	args := map[string]string{
		"a": fmt.Sprintf(`[{"name": "ncbr", "interface": "net1", "cni-args": {"qos": {"dscp": 46, "egressRate": %d, "egressBurst": 200000}}}]`, rate),
		"b": `[{"name": "ncbr", "interface": "net1", "cni-args": {"qos": {"dscp": 46}}}]`,
	}
	var pods []*corev1.Pod
	for _, name := range []string{"a", "b"} {
		p := testbed.OnNode(testbed.Pod(ns, name, "sleep", "3600"), n.Name)
		p.Annotations = map[string]string{annotationNetworks: args[name]}
		pods = append(pods, p)
	}
	e.RunPods(t, pods...)
	recs := map[string]*attach.Record{}
	addr := map[string]string{}
	for _, name := range []string{"a", "b"} {
		pod := getPod(t, e, ns, name)
		st := statusOf(t, pod, "net1")
		ifc := e.MustIface(t, ns, name, "net1")
		var ips []string
		for _, c := range ifc.CIDRs {
			ips = append(ips, strings.Split(c, "/")[0])
		}
		if st.Name != ns+"/ncbr" || !slices.Equal(st.IPs, ips) || len(ips) != 1 {
			t.Fatalf("pod %s: network-status entry %+v, interface net1 has %v: want name %s/ncbr and the same single address", name, st, ips, ns)
		}
		recs[name] = nadRecord(t, n, network, "net1", ifc.CIDRs[0])
		addr[name] = ips[0]
		t.Logf("pod %s: net1 %s (network-status %v), host end %s, sandbox %s", name, ifc.CIDRs, st.IPs, recs[name].HostIf, recs[name].ContainerID)
	}
	checkNADQoS(t, e, n, ns, recs, addr, rate)
	for _, name := range []string{"a", "b"} {
		deletePodAndWait(t, e, ns, name)
	}
	checkNADGone(t, n, network, ipamDir, recs)
}

// checkNADQoS: a's pings to b arrive at b's net1 with DSCP 46 (marked at
// a's port on the host, out of a's reach), b's echo requests to a too (the
// cni-args of each pod), and a TCP stream from a is capped by a's
// egressRate.
func checkNADQoS(t *testing.T, e *harness.Env, n bed.Node, ns string, recs map[string]*attach.Record, addr map[string]string, rate float64) {
	t.Helper()
	in := func(pod string) *nstest.NS {
		return &nstest.NS{Name: ns + "/" + pod, Path: netnsOn(e, n, recs[pod].NetNS)}
	}
	primarySeenAt(t, in("b"), "net1", addr["a"], addr["b"], isICMP, 46, pingFrom(t, e, ns, "a", addr["b"]), "a to b")
	primarySeenAt(t, in("a"), "net1", addr["b"], addr["a"], isICMP, 46, pingFrom(t, e, ns, "b", addr["a"]), "b to a")
	client, server := in("a"), in("b")
	got, err := traffic.TCPRate(client, server, netip.MustParseAddr(addr["b"]), 5201, 3*time.Second)
	if err != nil {
		t.Fatalf("TCP from a to b: %v", err)
	}
	t.Logf("TCP from a (egressRate %.0f Mbit/s from cni-args) to b: %.1f Mbit/s received", rate/1e6, got/1e6)
	if got > 1.1*rate || got < 0.5*rate {
		t.Fatalf("pod a sent %.1f Mbit/s, want at most its egressRate %.0f Mbit/s + 10%% (and at least half of it)", got/1e6, rate/1e6)
	}
}

// netnsOn is where a pod network namespace path of the node (a record's
// netns) opens from this machine: through netclass-dra's root on a node
// with a mount namespace of its own.
func netnsOn(e *harness.Env, n bed.Node, path string) string {
	if n.Primary() {
		return path
	}
	return fmt.Sprintf("/proc/%d/root%s", e.DRAOn(n.Name).PID(), path)
}

func deletePodAndWait(t *testing.T, e *harness.Env, ns, name string) {
	t.Helper()
	ctx := testbed.Context(t, 2*time.Minute)
	if err := e.Kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
	testbed.Poll(t, ctx, 200*time.Millisecond, "pod "+ns+"/"+name+" gone", func(ctx context.Context) (bool, string, error) {
		_, err := e.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		return false, "still there", err
	})
}

// checkNADGone: the pods' host ends, their host-local reservations and
// their plugin records are gone (the pod objects go after the sandbox's
// CNI DEL returned: nothing to wait for).
func checkNADGone(t *testing.T, n bed.Node, network, ipamDir string, recs map[string]*attach.Record) {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	for name, r := range recs {
		if out, err := n.Output(ctx, "ip", "-o", "link", "show", "dev", r.HostIf); err == nil {
			t.Errorf("pod %s deleted, its host end is still there: %s", name, out)
		}
		left, err := attach.Store{Dir: n.HostPath(pluginRecords)}.Get(network, r.ContainerID, r.IfName)
		if err != nil || left != nil {
			t.Errorf("pod %s deleted, its plugin record is still there: %+v (%v)", name, left, err)
		}
	}
	entries, err := os.ReadDir(filepath.Join(n.HostPath(ipamDir), network))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, en := range entries {
		if _, err := netip.ParseAddr(en.Name()); err == nil {
			t.Errorf("pods deleted, host-local still reserves %s (%s)", en.Name(), filepath.Join(ipamDir, network))
		}
	}
}

// removeNADState removes what the NAD's network leaves on the node when
// its last pod is gone: the bridge, the IPAM directory, the records' one.
func removeNADState(t *testing.T, n bed.Node, bridge, network, ipamDir string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := n.Output(ctx, "ip", "link", "show", "dev", bridge); err == nil {
		if _, err := n.Output(ctx, "ip", "link", "del", "dev", bridge); err != nil {
			t.Errorf("remove bridge %s: %v", bridge, err)
		}
	}
	for _, d := range []string{n.HostPath(ipamDir), filepath.Join(n.HostPath(pluginRecords), network)} {
		if err := os.RemoveAll(d); err != nil {
			t.Errorf("remove %s: %v", d, err)
		}
	}
}
