//go:build testbed

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	mnpv1beta1 "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/apis/k8s.cni.cncf.io/v1beta1"
	mnpclient "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// The truth table's scenarios written as MultiNetworkPolicies whose
// k8s.v1.cni.cncf.io/policy-for names the bed's PodNetwork give the net1
// verdicts policyeval gives for the labelled NetworkPolicies (one oracle
// for both): each labelled policy becomes a MultiNetworkPolicy of the same
// spec (copied through JSON, not by netclass's conversion) naming the
// network — or naming what its scoping annotation names, which for
// "another network" is a Network nsA/<name> that is not the PodNetwork: a
// MultiNetworkPolicy whose policy-for names another network changes
// nothing; an unlabelled one has no policy-for, one labelled for another
// controller a policy-for naming no netclass network. The agents must list
// them as MultiNetworkPolicies (and no NetworkPolicy), and a change must
// be in effect within a second (median, measured as for NetworkPolicy).
func TestMultiNetworkPolicyTruthTable(t *testing.T) {
	e := harness.Shared(t)
	b := newPolBed(t, e)
	client, err := mnpclient.NewForConfig(e.Rest)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	effects := truthTable(t, e, b, truthScenarios(b),
		func(sc polScenario) time.Time { return b.applyMulti(t, client, written, sc.policies) },
		func(what string) {
			b.waitAgentsShow(t, e, what, harness.AgentHasMulti)
			b.waitNone(t, e, what)
		})
	if median := logEffects(t, effects); median > time.Second {
		t.Errorf("MultiNetworkPolicy changes in effect after %v (median), want within 1s", median.Round(time.Millisecond))
	}
	unenforceableMulti(t, e, b, client, written)
}

// unenforceableMulti: a rule of a MultiNetworkPolicy netclass cannot
// compile (a named port to an ipBlock) is left out, and the Warning Event
// is on the MultiNetworkPolicy.
func unenforceableMulti(t *testing.T, e *harness.Env, b *polBed, client mnpclient.Interface, written map[string]bool) {
	t.Helper()
	b.applyMulti(t, client, written, pols(np(b.nsA, "named-egress", map[string]string{"app": "client"}, egressOnly,
		to(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: b.subnet}}, port(corev1.ProtocolTCP, intstr.FromString("http"), nil)))))
	client1 := b.pods[1]
	testbed.Poll(t, testbed.Context(t, liveTimeout), 250*time.Millisecond, "a NotEnforced Event on the MultiNetworkPolicy",
		func(ctx context.Context) (bool, string, error) {
			evs, err := e.Kube.CoreV1().Events(b.nsA).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=named-egress"})
			if err != nil {
				return false, "", err
			}
			var seen []string
			for _, ev := range evs.Items {
				seen = append(seen, ev.InvolvedObject.Kind+" "+ev.Reason+": "+ev.Message)
				if ev.InvolvedObject.Kind == "MultiNetworkPolicy" && ev.InvolvedObject.APIVersion == "k8s.cni.cncf.io/v1beta1" &&
					ev.Type == corev1.EventTypeWarning && ev.Reason == contract.ReasonPolicyNotEnforced &&
					strings.Contains(ev.Message, client1.String()) {
					return true, "", nil
				}
			}
			return false, strings.Join(seen, "; "), nil
		})
}

// TestNetworkPolicySurvivesSIGKILL with the policies written as
// MultiNetworkPolicies naming the bed's network: the kill during edits
// converges to the plans the objects give (the MultiNetworkPolicies
// compiled here), never opening the port no policy opens.
func TestMultiNetworkPolicySurvivesSIGKILL(t *testing.T) {
	e := harness.Shared(t)
	b := newPolBed(t, e)
	client, err := mnpclient.NewForConfig(e.Rest)
	if err != nil {
		t.Fatal(err)
	}
	written := map[string]bool{}
	survivesSIGKILL(t, e, b, func(ps []*networkingv1.NetworkPolicy) { b.applyMulti(t, client, written, ps) })
}

// waitNone: no NetworkPolicy applies to the bed's pods (the scenarios are
// all MultiNetworkPolicies).
func (b *polBed) waitNone(t *testing.T, e *harness.Env, what string) {
	t.Helper()
	none := map[string]map[string][]string{}
	for _, p := range b.pods {
		if none[p.node.Name] == nil {
			none[p.node.Name] = map[string][]string{}
		}
		none[p.node.Name][p.String()] = nil
	}
	for node, want := range none {
		e.DRAOn(node).WaitAgent(t, what+": no NetworkPolicy applied", harness.AgentHas("net1", want))
	}
}

// asMulti is the labelled NetworkPolicy as a MultiNetworkPolicy on the
// bed's network: the same spec (through JSON: the two APIs name their
// fields alike), a policy-for naming what the NetworkPolicy applies to.
func asMulti(t *testing.T, p *networkingv1.NetworkPolicy, network string) *mnpv1beta1.MultiNetworkPolicy {
	t.Helper()
	m := &mnpv1beta1.MultiNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
	raw, err := json.Marshal(p.Spec)
	if err == nil {
		err = json.Unmarshal(raw, &m.Spec)
	}
	if err != nil {
		t.Fatalf("NetworkPolicy %s/%s as a MultiNetworkPolicy: %v", p.Namespace, p.Name, err)
	}
	ctl, labelled := p.Labels[contract.PolicyControllerLabel]
	switch {
	case ctl == contract.PolicyController:
		names, scoped := p.Annotations[contract.AnnotationPolicyNetworks]
		if !scoped {
			names = network
		}
		m.Annotations = map[string]string{contract.AnnotationPolicyFor: names}
	case labelled: // another controller's, or none: netclass is not meant
		m.Annotations = map[string]string{contract.AnnotationPolicyFor: "elsewhere, " + p.Namespace + "/" + network}
	}
	return m
}

// applyMulti writes the policies as MultiNetworkPolicies (asMulti; those
// of the same name updated in place, the others written before deleted)
// and makes the labelled policies the oracle's world; it returns when the
// last write returned.
func (b *polBed) applyMulti(t *testing.T, client mnpclient.Interface, written map[string]bool, pols []*networkingv1.NetworkPolicy) time.Time {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	want := map[string]*mnpv1beta1.MultiNetworkPolicy{}
	for _, p := range pols {
		want[p.Namespace+"/"+p.Name] = asMulti(t, p, b.network)
	}
	for key := range written {
		if want[key] != nil {
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		if err := client.K8sCniCncfIoV1beta1().MultiNetworkPolicies(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		delete(written, key)
	}
	for key, m := range want {
		api := client.K8sCniCncfIoV1beta1().MultiNetworkPolicies(m.Namespace)
		cur, err := api.Get(ctx, m.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = api.Create(ctx, m, metav1.CreateOptions{})
		case err == nil:
			cur.Labels, cur.Annotations, cur.Spec = m.Labels, m.Annotations, m.Spec
			_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("write MultiNetworkPolicy %s: %v", key, err)
		}
		written[key] = true
	}
	b.world.Policies = pols
	return time.Now()
}
