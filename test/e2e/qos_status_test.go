//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/nstest"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/traffic"
)

// podNS is a pod's network namespace on node 1, from the checkpoint.
func podNS(t *testing.T, e *harness.Env, p *corev1.Pod) *nstest.NS {
	t.Helper()
	return &nstest.NS{Name: p.Namespace + "/" + p.Name, Path: e.Attachment(t, p.UID, "net1").NetNS}
}

// A running pod's metered NetworkQoS rule gets a new rate: the measured
// rate of the matching flow follows (±20%), the pod never restarted.
func TestNetworkQoSRateFollowsOnRunningPods(t *testing.T) {
	e := harness.Shared(t)
	n := e.BridgeNet(t, "e2e-rate", "net")
	src := harness.PodOn(e.Node, n.Namespace, "src", "net")
	src.Labels = map[string]string{"app": "src"}
	e.RunPods(t, src, harness.PodOn(e.Node, n.Namespace, "dst", "net"))
	e.Attached(t, n.Namespace, "src", "net", "net1")
	dst := netip.MustParseAddr(harness.Addr(t, e.Attached(t, n.Namespace, "dst", "net", "net1")))
	client, server := podNS(t, e, getPod(t, e, n.Namespace, "src")), podNS(t, e, getPod(t, e, n.Namespace, "dst"))

	kbps := traffic.Rate(4000)
	obj := &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: "meter"},
		Spec: ncv1.NetworkQoSSpec{NetworkSelectors: netclassNetworks(), PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "src"}},
			Egress: []ncv1.Rule{{DSCP: 10, Bandwidth: &ncv1.Bandwidth{Rate: ptr.To(kbps), Burst: ptr.To(kbps / 10)},
				Classifier: &ncv1.Classifier{Ports: []ncv1.Port{{Protocol: ncv1.ProtocolUDP, Port: ptr.To(int32(6000))}}}}}}}
	if _, err := e.NC.NetclassV1alpha1().NetworkQoSes(n.Namespace).Create(testbed.Context(t, time.Minute), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, rate := range []int64{kbps, kbps / 2} {
		if rate != kbps {
			err := updateQoS(t, e, n.Namespace, "meter", func(q *ncv1.NetworkQoS) {
				q.Spec.Egress[0].Bandwidth = &ncv1.Bandwidth{Rate: ptr.To(rate), Burst: ptr.To(rate / 10)}
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		want := float64(rate) * 1000
		var last float64
		testbed.Poll(t, testbed.Context(t, 2*liveTimeout), time.Millisecond, fmt.Sprintf("the UDP flow metered at %d kbps", rate),
			func(context.Context) (bool, string, error) {
				got, err := traffic.UDPRate(client, server, dst, 6000, 1200, 4*want, 3*time.Second, time.Second)
				if err != nil {
					return false, "", err
				}
				last = got.SteadyBps
				return math.Abs(got.SteadyBps-want) <= 0.2*want, fmt.Sprintf("%.2f Mbit/s", got.SteadyBps/1e6), nil
			})
		t.Logf("rule rate %d kbps: the flow gets %.2f Mbit/s", rate, last/1e6)
	}
	if p := getPod(t, e, n.Namespace, "src"); restarts(p) > 0 {
		t.Error("the source pod restarted")
	}
}

// More NetworkQoS rules than an attachment may hold (a tenant's objects
// can add up past qos.MaxRules) cannot be applied: the node reports
// ApplyFailed naming the pod and the reason, the controller's Ready says
// so, an Event marks it; removing objects brings Applied back.
func TestNetworkQoSApplyFailedIsReported(t *testing.T) {
	e := harness.Shared(t)
	n := runSrc(t, e, "e2e-fail")
	qoses := e.NC.NetclassV1alpha1().NetworkQoSes(n.Namespace)
	objects := qos.MaxRules/ncv1.MaxNetworkQoSRules + 1
	for i := range objects {
		obj := &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: fmt.Sprintf("many-%02d", i)},
			Spec: ncv1.NetworkQoSSpec{NetworkSelectors: netclassNetworks(), PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "src"}}}}
		for range ncv1.MaxNetworkQoSRules {
			obj.Spec.Egress = append(obj.Spec.Egress, ncv1.Rule{DSCP: 8})
		}
		if _, err := qoses.Create(testbed.Context(t, time.Minute), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testbed.Poll(t, testbed.Context(t, liveTimeout), 200*time.Millisecond, "NetworkQoS many-00: ApplyFailed on node "+e.Node,
		func(ctx context.Context) (bool, string, error) {
			q, err := qoses.Get(ctx, "many-00", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			ready := meta.FindStatusCondition(q.Status.Conditions, "Ready")
			for _, nd := range q.Status.Nodes {
				if nd.Node == e.Node && nd.Reason == ncv1.ReasonApplyFailed && strings.Contains(nd.Message, "pod "+n.Namespace+"/src") &&
					strings.Contains(nd.Message, fmt.Sprintf("at most %d rules", qos.MaxRules)) && ready != nil && ready.Reason == ncv1.ReasonApplyFailed {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("nodes %+v, Ready %+v", q.Status.Nodes, ready), nil
		})
	waitEvent(t, e, n.Namespace, "many-00", ncv1.ReasonApplyFailed)
	for i := 1; i < objects; i++ {
		if err := qoses.Delete(testbed.Context(t, time.Minute), fmt.Sprintf("many-%02d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitNodeReport(t, e, n.Namespace, "many-00", ncv1.ReasonApplied, 1)
}

// TestNetworkQoSRulesLeftOutAreReported: a NetworkQoS whose rules name
// more distinct destination selectors than a node resolves for one
// attachment (render.MaxSelectors) keeps its other rules Applied on the
// running pod; the node's entry and Ready's message name the first rule
// left out, a Warning Event NetworkQoSIgnored says so on the object, and
// the message goes once the object fits.
func TestNetworkQoSRulesLeftOutAreReported(t *testing.T) {
	e := harness.Shared(t)
	n := runSrc(t, e, "e2e-leftout")
	obj := &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: n.Namespace, Name: "wide"},
		Spec: ncv1.NetworkQoSSpec{NetworkSelectors: netclassNetworks(), PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "src"}}}}
	const perRule = 32 // the schema's bound of a rule's destinations
	for r := range ncv1.MaxNetworkQoSRules {
		rule := ncv1.Rule{DSCP: 8}
		for d := range perRule {
			sel := &metav1.LabelSelector{MatchLabels: map[string]string{"peer": fmt.Sprintf("p%d", r*perRule+d)}}
			rule.Classifier = &ncv1.Classifier{To: append(ruleTo(rule), ncv1.Destination{PodSelector: sel})}
		}
		obj.Spec.Egress = append(obj.Spec.Egress, rule)
	}
	qoses := e.NC.NetclassV1alpha1().NetworkQoSes(n.Namespace)
	if _, err := qoses.Create(testbed.Context(t, time.Minute), obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The selectors go to the rules in the order they take precedence
	// (the last first): the 256/perRule last rules fit, and the first rule
	// left out in the object's order is spec.egress[0].
	first := fmt.Sprintf("spec.egress[%d]: more than the 256 distinct destination selectors", 0)
	testbed.Poll(t, testbed.Context(t, liveTimeout), 200*time.Millisecond, "NetworkQoS wide: Applied on node "+e.Node+", naming "+first,
		func(ctx context.Context) (bool, string, error) {
			q, err := qoses.Get(ctx, "wide", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			ready := meta.FindStatusCondition(q.Status.Conditions, "Ready")
			for _, nd := range q.Status.Nodes {
				if nd.Node == e.Node && nd.Reason == ncv1.ReasonApplied && nd.Attachments == 1 && strings.Contains(nd.Message, "pod "+n.Namespace+"/src interface net1: "+first) &&
					ready != nil && ready.Reason == ncv1.ReasonApplied && strings.Contains(ready.Message, "some rules left out: node "+e.Node) {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("nodes %+v, Ready %+v", q.Status.Nodes, ready), nil
		})
	waitEvent(t, e, n.Namespace, "wide", contract.ReasonNetworkQoSIgnored)
	// within the bound: the message goes
	q, err := qoses.Get(testbed.Context(t, time.Minute), "wide", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	q.Spec.Egress = q.Spec.Egress[:256/perRule]
	if _, err := qoses.Update(testbed.Context(t, time.Minute), q, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testbed.Poll(t, testbed.Context(t, liveTimeout), 200*time.Millisecond, "NetworkQoS wide: Applied on node "+e.Node+" with no rule left out",
		func(ctx context.Context) (bool, string, error) {
			q, err := qoses.Get(ctx, "wide", metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			for _, nd := range q.Status.Nodes {
				if nd.Node == e.Node && nd.Reason == ncv1.ReasonApplied && nd.Message == "" {
					return true, "", nil
				}
			}
			return false, fmt.Sprintf("nodes %+v", q.Status.Nodes), nil
		})
}

// ruleTo is the rule's destinations so far.
func ruleTo(r ncv1.Rule) []ncv1.Destination {
	if r.Classifier == nil {
		return nil
	}
	return r.Classifier.To
}

// runSrc runs pod src (app=src) attached as net1 to a new bridge network.
func runSrc(t *testing.T, e *harness.Env, prefix string) harness.BridgeNet {
	t.Helper()
	n := e.BridgeNet(t, prefix, "net")
	src := harness.PodOn(e.Node, n.Namespace, "src", "net")
	src.Labels = map[string]string{"app": "src"}
	e.RunPods(t, src)
	e.Attached(t, n.Namespace, "src", "net", "net1")
	return n
}

// waitEvent waits for an Event of reason on the object name of namespace
// ns (Events are sent in the background by the daemons' broadcasters).
func waitEvent(t *testing.T, e *harness.Env, ns, name, reason string) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, liveTimeout), 200*time.Millisecond, fmt.Sprintf("a %s event on %s", reason, name),
		func(ctx context.Context) (bool, string, error) {
			evs, err := e.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
				FieldSelector: fields.Set{"involvedObject.name": name, "reason": reason}.String()})
			if err != nil {
				return false, err.Error(), nil
			}
			return len(evs.Items) > 0, fmt.Sprintf("%d events", len(evs.Items)), nil
		})
}
