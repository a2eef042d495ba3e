//go:build testbed

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/daemon"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// A netclass attachment Multus made whose pod's network-status stops
// naming its NAD (whoever may update the pod can edit the annotation) has
// no network the node's agent can tell: once it has waited
// daemon.NetworkStatusGrace, the pod gets a Warning Event
// NetworkStatusMissing naming the interface and why; only one.
func TestMultusAttachmentWithoutNetworkStatus(t *testing.T) {
	e := harness.Shared(t)
	startMultus(t)
	n := e.Nodes[len(e.Nodes)-1]
	ns, _, _ := bridgeNAD(t, e, n, "unnamed", "10.79.0.0/24")
	p := testbed.OnNode(testbed.Pod(ns, "a", "sleep", "3600"), n.Name)
	p.Annotations = map[string]string{annotationNetworks: `[{"name": "ncbr", "interface": "net1"}]`}
	e.RunPods(t, p)
	pod := getPod(t, e, ns, "a")
	if st := statusOf(t, pod, "net1"); st.Name != ns+"/ncbr" {
		t.Fatalf("network-status entry of net1 %+v, want it to name %s/ncbr", st, ns)
	}
	dra := e.DRAOn(n.Name)
	dra.WaitAgent(t, "net1 on its NAD", agentLists(ns+"/a", "net1", false, ns+"/ncbr"))
	stripStatus(t, e, pod, "net1")
	stripped := time.Now()
	want := "interface net1, made by a netclass plugin for Multus, gets no NetworkPolicy or NetworkQoS change, until the pod's network-status names its NetworkAttachmentDefinition: annotation " +
		annotationNetworkStatus + " has no entry for interface net1"
	var got []corev1.Event
	testbed.Poll(t, testbed.Context(t, daemon.NetworkStatusGrace+time.Minute), 500*time.Millisecond, "a Warning Event "+contract.ReasonNetworkStatusMissing+" on pod a",
		func(ctx context.Context) (bool, string, error) {
			got = podEvents(ctx, t, e, ns, "a", contract.ReasonNetworkStatusMissing)
			return len(got) > 0, testbed.Events(ctx, e.Kube, ns, "a"), nil
		})
	took := time.Since(stripped)
	if ev := got[0]; ev.Type != corev1.EventTypeWarning || ev.Message != want || ev.Count > 1 || len(got) > 1 {
		t.Errorf("events %s: %+v, want one Warning, once, saying %q", contract.ReasonNetworkStatusMissing, got, want)
	}
	if took < daemon.NetworkStatusGrace {
		t.Errorf("the Event came %v after the annotation was edited, before the grace of %v", took, daemon.NetworkStatusGrace)
	}
	t.Logf("%v after the edit: %s %s: %s", took.Round(time.Millisecond), got[0].Type, got[0].Reason, got[0].Message)
	dra.WaitAgent(t, "net1 listed as waiting for its network-status, on the network it held", agentLists(ns+"/a", "net1", true, ns+"/ncbr"))
	deletePodAndWait(t, e, ns, "a")
}

// A pod whose network-status moves its netclass interface to another NAD
// (one whose config is another CNI network than the one the interface was
// made on) does not take that NAD's policies and QoS: the agent keeps the
// interface's rules, lists it as waiting for its network-status, and the
// pod gets the Warning Event saying why.
func TestMultusAttachmentMovedToAnotherNAD(t *testing.T) {
	e := harness.Shared(t)
	startMultus(t)
	n := e.Nodes[len(e.Nodes)-1]
	ns, network, _ := bridgeNAD(t, e, n, "moved", "10.78.0.0/24")
	createNAD(t, e, ns, "other", map[string]any{"cniVersion": "1.0.0", "name": "e2e-elsewhere", "type": "netclass-bridge", "bridge": "ncelsewhere"})
	p := testbed.OnNode(testbed.Pod(ns, "a", "sleep", "3600"), n.Name)
	p.Annotations = map[string]string{annotationNetworks: `[{"name": "ncbr", "interface": "net1"}]`}
	e.RunPods(t, p)
	dra := e.DRAOn(n.Name)
	dra.WaitAgent(t, "net1 on its NAD", agentLists(ns+"/a", "net1", false, ns+"/ncbr"))
	editStatus(t, e, getPod(t, e, ns, "a"), func(entries []map[string]any) []map[string]any {
		for _, en := range entries {
			if en["interface"] == "net1" {
				en["name"] = ns + "/other"
			}
		}
		return entries
	})
	dra.WaitAgent(t, "net1 waiting for its network-status, on the network it held", agentLists(ns+"/a", "net1", true, ns+"/ncbr"))
	want := fmt.Sprintf("until the pod's network-status names its NetworkAttachmentDefinition: annotation %s names NetworkAttachmentDefinition %s/other, whose config is CNI network \"e2e-elsewhere\", but the interface was made on CNI network %q",
		annotationNetworkStatus, ns, network)
	var got []corev1.Event
	testbed.Poll(t, testbed.Context(t, daemon.NetworkStatusGrace+time.Minute), 500*time.Millisecond, "a Warning Event "+contract.ReasonNetworkStatusMissing+" on pod a",
		func(ctx context.Context) (bool, string, error) {
			got = podEvents(ctx, t, e, ns, "a", contract.ReasonNetworkStatusMissing)
			return len(got) > 0, testbed.Events(ctx, e.Kube, ns, "a"), nil
		})
	if !strings.HasSuffix(got[0].Message, want) {
		t.Errorf("event %q, want it to end with %q", got[0].Message, want)
	}
	deletePodAndWait(t, e, ns, "a")
}

// agentLists is a WaitAgent condition: the pod's (<namespace>/<name>)
// interface is listed on the network named ...nad, waiting for its
// network-status or not.
func agentLists(pod, ifname string, waiting bool, nad string) func([]harness.AgentAttachment) (bool, string) {
	return func(atts []harness.AgentAttachment) (bool, string) {
		for _, a := range atts {
			if a.Pod == pod && a.Interface == ifname {
				return a.NetworkStatusMissing == waiting && strings.HasSuffix(a.Network, nad), fmt.Sprintf("listed as %+v", a)
			}
		}
		return false, ifname + " of pod " + pod + " not listed"
	}
}

// stripStatus removes the interface's entry from the pod's network-status,
// as a user allowed to update the pod can.
func stripStatus(t *testing.T, e *harness.Env, pod *corev1.Pod, ifname string) {
	t.Helper()
	editStatus(t, e, pod, func(entries []map[string]any) []map[string]any {
		return slices.DeleteFunc(entries, func(en map[string]any) bool { return en["interface"] == ifname })
	})
}

// editStatus rewrites the pod's network-status with edit, as a user
// allowed to update the pod can.
func editStatus(t *testing.T, e *harness.Env, pod *corev1.Pod, edit func([]map[string]any) []map[string]any) {
	t.Helper()
	var entries []map[string]any
	if err := json.Unmarshal([]byte(pod.Annotations[annotationNetworkStatus]), &entries); err != nil {
		t.Fatalf("network-status of %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	value, err := json.Marshal(edit(entries))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotationNetworkStatus: string(value)}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kube.CoreV1().Pods(pod.Namespace).Patch(testbed.Context(t, time.Minute), pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("patch the network-status of %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// podEvents lists the pod's events of the reason.
func podEvents(ctx context.Context, t *testing.T, e *harness.Env, ns, pod, reason string) []corev1.Event {
	t.Helper()
	list, err := e.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason})
	if err != nil {
		t.Logf("list events: %v", err)
		return nil
	}
	var out []corev1.Event
	for _, ev := range list.Items {
		if strings.EqualFold(ev.InvolvedObject.Kind, "Pod") {
			out = append(out, ev)
		}
	}
	return out
}
