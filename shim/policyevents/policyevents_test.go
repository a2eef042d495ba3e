package policyevents

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/netpolicy"
	"github.com/netclass-dev/netclass/shim/ruleagent"
)

var blue = attachment.NetworkRef{Kind: "PodNetwork", Name: "blue"}

func outcome(pod string, ignored, failed error, policies ...string) ruleagent.Outcome {
	return ruleagent.Outcome{Pod: types.NamespacedName{Namespace: "t1", Name: pod}, IfName: "net1", Network: blue,
		Policies: policies, PolicyIgnored: ignored, PolicyErr: failed}
}

func TestProblems(t *testing.T) {
	left := errors.Join(&netpolicy.RuleError{Namespace: "t1", Name: "a", Path: "egress[0]", Err: errors.New(`named port "http"`)},
		&netpolicy.RuleError{Namespace: "t1", Name: "b", Path: "ingress[2]", Err: errors.New("bad")})
	left = errors.Join(left, &netpolicy.RuleError{Kind: netpolicy.KindMultiNetworkPolicy, Namespace: "t1", Name: "a", Path: "ingress[0]", Err: errors.New("bad")},
		&netpolicy.RuleError{Kind: netpolicy.KindClusterNetworkPolicy, Name: "admin", Path: "egress[1]", Err: errors.New("peers netclass does not enforce: [to[0].nodes]")})
	failed := outcome("q", nil, errors.New("netns gone"), "a", "c")
	failed.MultiPolicies, failed.ClusterPolicies = []string{"m"}, []string{"admin"}
	got := Problems("n1", []ruleagent.Outcome{
		outcome("ok", nil, nil, "a"),
		outcome("p", left, nil, "a", "b"),
		failed,
	})
	var short []string
	for _, ev := range got {
		short = append(short, fmt.Sprintf("%s %s/%s %s", ev.Kind, ev.Namespace, ev.Name, ev.Reason))
		if !strings.Contains(ev.Message, "node n1") || !strings.Contains(ev.Message, "pod t1/") {
			t.Errorf("message %q does not name the pod and node", ev.Message)
		}
	}
	want := []string{"NetworkPolicy t1/a NotEnforced", "NetworkPolicy t1/b NotEnforced", "MultiNetworkPolicy t1/a NotEnforced",
		"ClusterNetworkPolicy /admin NotEnforced",
		"NetworkPolicy t1/a EnforceFailed", "NetworkPolicy t1/c EnforceFailed", "MultiNetworkPolicy t1/m EnforceFailed",
		"ClusterNetworkPolicy /admin EnforceFailed"}
	if !slices.Equal(short, want) {
		t.Errorf("events %v, want %v", short, want)
	}
}

// A problem is reported once while it lasts, and again when it returns.
func TestObserveReportsOnce(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	r := &Recorder{Node: "n1", Events: rec, Policy: func(_, ns, name string) (runtime.Object, error) {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, nil
	}}
	bad := outcome("p", &netpolicy.RuleError{Namespace: "t1", Name: "a", Path: "egress[0]", Err: errors.New("x")}, nil, "a")
	for _, outs := range [][]ruleagent.Outcome{{bad}, {bad}, {outcome("p", nil, nil, "a")}, {bad}} {
		r.Observe(outs)
	}
	if n := len(rec.Events); n != 2 {
		t.Errorf("%d events, want 2 (the problem, then its return)", n)
	}
	for range len(rec.Events) {
		if ev := <-rec.Events; !strings.HasPrefix(ev, "Warning NotEnforced pod t1/p interface net1") {
			t.Errorf("event %q", ev)
		}
	}
}

// A bad scoping annotation is the policy's own problem: one Event per
// node, however many attachments it failed to select.
func TestScopeProblemIsOneEvent(t *testing.T) {
	scope := &netpolicy.RuleError{Namespace: "t1", Name: "s", Path: netpolicy.ScopePath, Err: errors.New(`"bleu" names no PodNetwork or Network`)}
	got := Problems("n1", []ruleagent.Outcome{outcome("p", scope, nil), outcome("q", scope, nil)})
	evs := map[Event]bool{}
	for _, ev := range got {
		evs[ev] = true
	}
	if len(evs) != 1 {
		t.Fatalf("events %v, want one", got)
	}
	for ev := range evs {
		if ev.Reason != "NetworksNotFound" || !strings.Contains(ev.Message, `"bleu" names no PodNetwork`) || strings.Contains(ev.Message, "pod t1/") {
			t.Errorf("event %+v", ev)
		}
	}
}
