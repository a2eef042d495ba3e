//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// liveTimeout bounds how long the rule agent (shim/ruleagent) may take to bring a running
// pod's rules to an object's new state.
const liveTimeout = 30 * time.Second

// eventuallySeen pings dst from the pod until a capture at dst, started
// afresh for each attempt, sees three of the pings from src with dscp.
func eventuallySeen(t *testing.T, e *harness.Env, ns, pod string, dst *corev1.Pod, dstAddr, src string, dscp uint8, what string) {
	t.Helper()
	att := e.Attachment(t, dst.UID, "net1")
	deadline := time.Now().Add(liveTimeout)
	var last []traffic.Packet
	for time.Now().Before(deadline) {
		s, err := traffic.Sniff(&nstest.NS{Name: dst.Namespace + "/" + dst.Name, Path: att.NetNS}, "net1")
		if err != nil {
			t.Fatalf("capture on net1 of pod %s: %v", dst.Name, err)
		}
		e.Ping(t, ns, pod, "net1", dstAddr)
		got := s.WaitFor(icmpFrom(src, dscp), 3, time.Second)
		last = s.Packets()
		s.Close()
		if len(got) >= 3 {
			return
		}
	}
	t.Fatalf("%s: no three pings from %s with DSCP %d at %s within %v; the last attempt saw %+v", what, src, dscp, dstAddr, liveTimeout, last)
}

// NetworkQoS follows running pods: created, edited (DSCP, classifier),
// its source pod relabelled, its destination pods coming and going, and
// deleted; no pod is ever restarted. The first check after each change is
// one only the change makes true (a mark that appears or goes); the
// others follow it, under the new rules. The pods run on node 1, whose
// checkpoint the captures read.
func TestNetworkQoSFollowsRunningPods(t *testing.T) {
	e := harness.Shared(t)
	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "e2e"+harness.Unique(6), "e2e-live-"+harness.Unique(6)
	subnet := harness.RandomSubnet()
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, subnet), nil, bridge)
	ns := testbed.Namespace(t, e.Kube)
	e.WaitDevice(t, class, "", pn, true)
	e.ClaimTemplate(t, ns, "net", class, "", pn, nil)

	src := harness.PodOn(e.Node, ns, "src", "net")
	src.Labels = map[string]string{"app": "src"}
	e.RunPods(t, src, harness.PodOn(e.Node, ns, "peer", "net"), harness.PodOn(e.Node, ns, "other", "net"))
	srcAddr := harness.Addr(t, e.Attached(t, ns, "src", "net", "net1"))
	peerAddr := harness.Addr(t, e.Attached(t, ns, "peer", "net", "net1"))
	otherAddr := harness.Addr(t, e.Attached(t, ns, "other", "net", "net1"))
	peer, other := getPod(t, e, ns, "peer"), getPod(t, e, ns, "other")
	started := map[string]types.UID{"src": getPod(t, e, ns, "src").UID, "peer": peer.UID, "other": other.UID}
	seen := func(dst *corev1.Pod, dstAddr string, dscp uint8, what string) {
		t.Helper()
		eventuallySeen(t, e, ns, "src", dst, dstAddr, srcAddr, dscp, what)
	}
	seen(peer, peerAddr, 0, "no NetworkQoS yet")

	obj := &ncv1.NetworkQoS{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "live"},
		Spec: ncv1.NetworkQoSSpec{
			NetworkSelectors: netclassNetworks(),
			PodSelector:      metav1.LabelSelector{MatchLabels: map[string]string{"app": "src"}},
			Egress:           []ncv1.Rule{{DSCP: 18, Classifier: &ncv1.Classifier{To: []ncv1.Destination{{IPBlock: &ncv1.IPBlock{CIDR: ncv1.CIDR(subnet)}}}}}},
		},
	}
	qoses := e.NC.NetclassV1alpha1().NetworkQoSes(ns)
	if _, err := qoses.Create(testbed.Context(t, time.Minute), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkQoS: %v", err)
	}
	seen(peer, peerAddr, 18, "NetworkQoS created")
	waitNodeReport(t, e, ns, "live", ncv1.ReasonApplied, 1)
	if len(e.Nodes) > 1 {
		// A selected pod on another node: each node reports its own entry,
		// with a field manager of its own, and neither overwrites the other.
		other := e.Nodes[len(e.Nodes)-1].Name
		far := harness.PodOn(other, ns, "src-far", "net")
		far.Labels = map[string]string{"app": "src"}
		e.RunPods(t, far)
		e.Attached(t, ns, "src-far", "net", "net1")
		waitNodes(t, e, ns, "live", map[string]int32{e.Node: 1, other: 1}, "enforced on 2 attachments on 2 nodes")
		deletePod(t, e, ns, "src-far")
		waitNodes(t, e, ns, "live", map[string]int32{e.Node: 1}, "enforced on 1 attachments on 1 nodes")
	}

	edit := func(what string, mutate func(*ncv1.NetworkQoS)) {
		t.Helper()
		if err := updateQoS(t, e, ns, "live", mutate); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	edit("DSCP 18 -> 26", func(o *ncv1.NetworkQoS) { o.Spec.Egress[0].DSCP = 26 })
	seen(peer, peerAddr, 26, "DSCP edited")

	edit("classifier: the other pod only", func(o *ncv1.NetworkQoS) {
		o.Spec.Egress[0].Classifier.To[0].IPBlock.CIDR = ncv1.CIDR(otherAddr + "/32")
	})
	// the old destination first: only the edit unmarks it (the whole subnet
	// marked both), so the new one is then looked at under the new rule
	seen(peer, peerAddr, 0, "classifier edited: the old destination")
	seen(other, otherAddr, 26, "classifier edited: the new destination")

	edit("destination by pod selector", func(o *ncv1.NetworkQoS) {
		o.Spec.Egress[0].Classifier.To = []ncv1.Destination{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "late"}}}}
	})
	late := harness.PodOn(e.Node, ns, "late", "net")
	late.Labels = map[string]string{"role": "late"}
	e.RunPods(t, late)
	lateAddr := harness.Addr(t, e.Attached(t, ns, "late", "net", "net1"))
	latePod := getPod(t, e, ns, "late")
	seen(latePod, lateAddr, 26, "a destination pod started after the source")
	seen(other, otherAddr, 0, "the previous destination, which the selector does not select")
	seen(peer, peerAddr, 0, "a pod the destination selector does not select")

	deletePod(t, e, ns, "late")
	waitNoRuleFor(t, lateAddr)

	edit("classifier: the whole subnet again", func(o *ncv1.NetworkQoS) {
		o.Spec.Egress[0].Classifier.To = []ncv1.Destination{{IPBlock: &ncv1.IPBlock{CIDR: ncv1.CIDR(subnet)}}}
	})
	seen(peer, peerAddr, 26, "classifier edited: the whole subnet again")
	relabel(t, e, ns, "src", map[string]string{"app": "elsewhere"})
	seen(peer, peerAddr, 0, "the source relabelled out of podSelector")
	waitNodeReport(t, e, ns, "live", "", 0)
	relabel(t, e, ns, "src", map[string]string{"app": "src"})
	seen(peer, peerAddr, 26, "the source relabelled back in")

	if err := qoses.Delete(testbed.Context(t, time.Minute), "live", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	seen(peer, peerAddr, 0, "NetworkQoS deleted")

	for name, uid := range started {
		if got := getPod(t, e, ns, name); got.UID != uid || restarts(got) > 0 {
			t.Errorf("pod %s was recreated or restarted", name)
		}
	}
}

// updateQoS edits a NetworkQoS, again when a status write came between its
// read and its update.
func updateQoS(t *testing.T, e *harness.Env, ns, name string, mutate func(*ncv1.NetworkQoS)) error {
	qoses := e.NC.NetclassV1alpha1().NetworkQoSes(ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		q, err := qoses.Get(testbed.Context(t, time.Minute), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		mutate(q)
		_, err = qoses.Update(testbed.Context(t, time.Minute), q, metav1.UpdateOptions{})
		return err
	})
}

func relabel(t *testing.T, e *harness.Env, ns, pod string, labels map[string]string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := getPod(t, e, ns, pod)
		p.Labels = labels
		_, err := e.Kube.CoreV1().Pods(ns).Update(testbed.Context(t, time.Minute), p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("relabel pod %s: %v", pod, err)
	}
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// waitNoRuleFor waits until no set of node 1's port rules holds addr: the
// address of a deleted peer is no longer matched, whoever gets it next.
func waitNoRuleFor(t *testing.T, addr string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, liveTimeout), 250*time.Millisecond, "no QoS rule matches "+addr,
		func(ctx context.Context) (bool, string, error) {
			out, err := exec.CommandContext(ctx, "nft", "list", "table", "bridge", "netclass_qos").CombinedOutput()
			if err != nil {
				return false, "", fmt.Errorf("nft list table bridge netclass_qos: %w: %s", err, out)
			}
			held := regexp.MustCompile(regexp.QuoteMeta(addr) + `\b`).Match(out)
			return !held, string(out), nil
		})
}

// waitNodeReport waits until node 1's entry in the NetworkQoS's status has
// the reason and attachment count ("" and 0: until it has no entry), and
// the controller's Ready sums it up (Applied, or Pending without entries).
func waitNodeReport(t *testing.T, e *harness.Env, ns, name, reason string, attachments int32) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, liveTimeout), 200*time.Millisecond, fmt.Sprintf("NetworkQoS %s: node %s reports %q on %d attachments", name, e.Node, reason, attachments),
		func(context.Context) (bool, string, error) {
			// a context of its own: the last attempt reports the state, not the deadline
			q, err := e.NC.NetclassV1alpha1().NetworkQoSes(ns).Get(testbed.Context(t, time.Minute), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			var got *ncv1.NetworkQoSNodeStatus
			for i := range q.Status.Nodes {
				if q.Status.Nodes[i].Node == e.Node {
					got = &q.Status.Nodes[i]
				}
			}
			ready := meta.FindStatusCondition(q.Status.Conditions, "Ready")
			state := fmt.Sprintf("nodes %+v, Ready %+v", q.Status.Nodes, ready)
			if reason == "" {
				return got == nil && ready != nil && ready.Reason == "Pending", state, nil
			}
			return got != nil && got.Reason == reason && got.Attachments == attachments && ready != nil && ready.Reason == reason, state, nil
		})
}

// waitNodes waits until the NetworkQoS's status.nodes is exactly the
// given nodes, each Applied on its number of attachments, and Ready's
// message is ready.
func waitNodes(t *testing.T, e *harness.Env, ns, name string, want map[string]int32, ready string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, liveTimeout), 200*time.Millisecond, fmt.Sprintf("NetworkQoS %s: nodes %v Applied, Ready %q", name, want, ready),
		func(context.Context) (bool, string, error) {
			// a context of its own: the last attempt reports the state, not the deadline
			q, err := e.NC.NetclassV1alpha1().NetworkQoSes(ns).Get(testbed.Context(t, time.Minute), name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			r := meta.FindStatusCondition(q.Status.Conditions, "Ready")
			state := fmt.Sprintf("nodes %+v, Ready %+v", q.Status.Nodes, r)
			if len(q.Status.Nodes) != len(want) || r == nil || r.Message != ready {
				return false, state, nil
			}
			for _, n := range q.Status.Nodes {
				if a, ok := want[n.Node]; !ok || n.Attachments != a || n.Reason != ncv1.ReasonApplied {
					return false, state, nil
				}
			}
			return true, state, nil
		})
}

// netclassNetworks selects every netclass network (PodNetworks and the
// namespace's Networks), and not the default network: what an omitted
// networkSelectors meant before it meant the default network.
func netclassNetworks() ncv1.NetworkSelectors {
	return ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.PodNetworks, PodNetworkSelector: &metav1.LabelSelector{}},
		{NetworkSelectionType: ncv1.Networks, NetworkSelector: &metav1.LabelSelector{}}}
}
