//go:build testbed

package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/peers"
	"github.com/netclass-dev/netclass/shim/render"
	"github.com/netclass-dev/netclass/shim/ruleagent"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// netclass-dra is SIGKILLed in the middle of a storm of NetworkQoS edits and
// pod relabels, and more edits land while it is down: once it is back,
// every attachment's rules on the node equal what the objects say, as
// computed here from the API objects alone and compared with the kernel's
// nftables state (CHECK of the port's chains, sets and map entry). The
// pods run on node 1, whose namespace the test reads.
func TestQoSConvergesAfterSIGKILLDuringUpdates(t *testing.T) {
	e := harness.Shared(t)
	d := e.DRAOn(e.Node)
	restartAtEnd(t, d)
	class := e.Class(t, harness.PodNetworkKind)
	bridge, pn := "e2e"+harness.Unique(6), "e2e-storm-"+harness.Unique(6)
	e.PodNetwork(t, pn, harness.BridgeParams(bridge, harness.RandomSubnet()), map[string]string{"qos": "storm"}, bridge)
	ns := testbed.Namespace(t, e.Kube)
	e.WaitDevice(t, class, "", pn, true)
	e.ClaimTemplate(t, ns, "net", class, "", pn, nil)
	names := []string{"p0", "p1", "p2", "p3"}
	var pods []*corev1.Pod
	for i, name := range names {
		p := harness.PodOn(e.Node, ns, name, "net")
		p.Labels = map[string]string{"app": []string{"src", "peer"}[i%2]}
		pods = append(pods, p)
	}
	e.RunPods(t, pods...)
	for _, name := range names {
		e.Attached(t, ns, name, "net", "net1")
	}
	qoses := e.NC.NetclassV1alpha1().NetworkQoSes(ns)
	obj := &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storm"},
		Spec: ncv1.NetworkQoSSpec{
			NetworkSelectors: netclassNetworks(),
			PodSelector:      metav1.LabelSelector{MatchLabels: map[string]string{"app": "src"}},
			Egress: []ncv1.Rule{{DSCP: 10, Classifier: &ncv1.Classifier{To: []ncv1.Destination{{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "peer"}}}}}}},
		}}
	if _, err := qoses.Create(testbed.Context(t, time.Minute), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// One step of the storm: a new DSCP, and one pod changes sides.
	step := func(i int) {
		t.Helper()
		if err := updateQoS(t, e, ns, "storm", func(q *ncv1.NetworkQoS) { q.Spec.Egress[0].DSCP = int32(10 + i%40) }); err != nil {
			t.Fatalf("storm step %d: %v", i, err)
		}
		side := []string{"src", "peer"}[(i/len(names))%2]
		relabel(t, e, ns, names[i%len(names)], map[string]string{"app": side})
	}
	stormAcrossKill(t, d, 0, 10, step)
	testbed.Poll(t, testbed.Context(t, liveTimeout), 250*time.Millisecond, "every attachment's rules equal what the objects say",
		func(context.Context) (bool, string, error) {
			// a context of its own: the last attempt reports the mismatch, not the deadline
			err := rulesMatchObjects(testbed.Context(t, time.Minute), e, ns, pn)
			return err == nil, fmt.Sprint(err), nil
		})
}

// rulesMatchObjects compares each attachment of the namespace on node 1
// with the plan the API objects give it now.
func rulesMatchObjects(ctx context.Context, e *harness.Env, ns, pn string) error {
	objs, err := e.NC.NetclassV1alpha1().NetworkQoSes(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var qs []*ncv1.NetworkQoS
	for i := range objs.Items {
		qs = append(qs, &objs.Items[i])
	}
	pnObj, err := e.NC.MultinetworkV1().PodNetworks().Get(ctx, pn, metav1.GetOptions{})
	if err != nil {
		return err
	}
	resolver := apiResolver(ctx, e)
	c, err := nft.OpenCurrent()
	if err != nil {
		return err
	}
	return eachAttachment(ctx, e, []string{ns}, func(pod *corev1.Pod, dev checkpoint.Device, at checkpoint.Attachment) error {
		return attachmentMatches(c, pod, dev, at, qs, network.Network{Ref: dev.Network, Labels: pnObj.Labels}, resolver)
	})
}

func attachmentMatches(c *nftables.Conn, pod *corev1.Pod, dev checkpoint.Device, at checkpoint.Attachment,
	qs []*ncv1.NetworkQoS, net network.Network, resolver peers.Resolver) error {
	if dev.QoS == nil {
		return errors.New("the device has no recorded qos")
	}
	plan, _, _, err := ruleagent.Desired(dev.QoS.Base, qs, render.Target{Namespace: pod.Namespace, PodLabels: pod.Labels, Network: net}, resolver)
	if err != nil {
		return err
	}
	host, err := qosport.HostEnd(at.NetNS, at.IfName)
	if err != nil {
		return err
	}
	if !plan.NeedsRules() {
		if has, err := nft.HasPortQoS(c, host); err != nil || has {
			return fmt.Errorf("(%s): rules present, the objects want none (%v)", labels.Set(pod.Labels), err)
		}
		return nil
	}
	if err := nft.CheckPortQoS(c, host, plan); err != nil {
		return fmt.Errorf("(%s): %w", strings.TrimSpace(labels.Set(pod.Labels).String()), err)
	}
	return nil
}
