package qosstatus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	ncapply "github.com/netclass-dev/netclass/api/generated/applyconfigurations/netclass/v1alpha1"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/render"
	"github.com/netclass-dev/netclass/shim/ruleagent"
)

func out(pod string, err error, selected ...string) ruleagent.Outcome {
	return ruleagent.Outcome{Pod: types.NamespacedName{Namespace: "t1", Name: pod}, IfName: "net1", Selected: selected, QoSErr: err, Err: err}
}

func TestSummarise(t *testing.T) {
	fail := errors.New("pod t1/b interface net1: netns vanished")
	policyFailed := out("e", nil, "web") // its NetworkPolicy failed, its QoS holds
	policyFailed.PolicyErr = errors.New("policy of net1: netns vanished")
	policyFailed.Err = policyFailed.PolicyErr
	got := Summarise([]ruleagent.Outcome{
		out("a", nil, "web", "all"), out("b", fail, "all"), out("c", nil), out("d", fail, "all"), policyFailed,
	})
	want := map[types.NamespacedName]Entry{
		{Namespace: "t1", Name: "web"}: {Attachments: 2},
		{Namespace: "t1", Name: "all"}: {Attachments: 1, Failure: "2 attachments failed; the first: pod t1/b interface net1: netns vanished"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
	long := errors.New(strings.Repeat("x", 2000))
	if e := Summarise([]ruleagent.Outcome{out("a", long, "web")})[types.NamespacedName{Namespace: "t1", Name: "web"}]; len(e.Failure) != maxMessage {
		t.Errorf("a long failure is %d bytes, want the API's limit %d", len(e.Failure), maxMessage)
	}
}

type fakeClient struct {
	applied []*ncapply.NetworkQoSApplyConfiguration
}

func (f *fakeClient) ApplyStatus(_ context.Context, obj *ncapply.NetworkQoSApplyConfiguration, opts metav1.ApplyOptions) (*ncv1.NetworkQoS, error) {
	if opts.FieldManager != "netclass-dra/n1" || !opts.Force {
		return nil, errors.New("not the node's field manager")
	}
	f.applied = append(f.applied, obj)
	return &ncv1.NetworkQoS{}, nil
}

func TestWriterWritesOnlyItsChangedEntries(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	obj := func(name string, nodes ...ncv1.NetworkQoSNodeStatus) *ncv1.NetworkQoS {
		return &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: name}, Status: ncv1.NetworkQoSStatus{Nodes: nodes}}
	}
	objs := []*ncv1.NetworkQoS{
		obj("same", ncv1.NetworkQoSNodeStatus{Node: "n1", Attachments: 1, Reason: "Applied", LastTransitionTime: then}),
		obj("more", ncv1.NetworkQoSNodeStatus{Node: "n1", Attachments: 1, Reason: "Applied", LastTransitionTime: then}),
		obj("gone", ncv1.NetworkQoSNodeStatus{Node: "n1", Attachments: 1, Reason: "Applied", LastTransitionTime: then}),
		obj("others", ncv1.NetworkQoSNodeStatus{Node: "n2", Attachments: 1, Reason: "Applied", LastTransitionTime: then}),
		obj("failing"),
	}
	client := &fakeClient{}
	events := record.NewFakeRecorder(10)
	w := &Writer{Node: "n1", Objects: func() ([]*ncv1.NetworkQoS, error) { return objs, nil },
		Client: func(string) Client { return client }, Events: events, Now: time.Now}
	err := w.Write(context.Background(), []ruleagent.Outcome{
		out("a", nil, "same", "more"), out("b", nil, "more"), out("c", errors.New("netns vanished"), "failing"),
	})
	if err != nil {
		t.Fatal(err)
	}
	applied := map[string]*ncapply.NetworkQoSStatusApplyConfiguration{}
	for _, a := range client.applied {
		applied[*a.Name] = a.Status
	}
	if len(applied) != 3 {
		t.Fatalf("applied %v; want more, gone and failing only (same is unchanged, others is not this node's)", keys(applied))
	}
	if n := applied["more"].Nodes; len(n) != 1 || *n[0].Attachments != 2 || !n[0].LastTransitionTime.Equal(&then) {
		t.Errorf("more: %+v, want 2 attachments and the reason's first transition time kept", n)
	}
	if n := applied["gone"].Nodes; len(n) != 0 {
		t.Errorf("gone: %+v, want no entry (server-side apply then drops the node's)", n)
	}
	if n := applied["failing"].Nodes; len(n) != 1 || *n[0].Reason != "ApplyFailed" || *n[0].Message != "netns vanished" {
		t.Errorf("failing: %+v, want ApplyFailed with the error", n)
	}
	select {
	case ev := <-events.Events:
		if !strings.Contains(ev, "Warning ApplyFailed node n1: netns vanished") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no event for the failure")
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Rules a node left out of its attachments' are in its Applied entry's
// message (the first, and on how many attachments), with one Warning Event
// when they start, not one per change of their count.
func TestRulesLeftOutAreReported(t *testing.T) {
	bound := &render.IgnoredRule{Namespace: "t1", Name: "web", Path: "spec.egress[2]", Err: errors.New("its destination selectors select too much")}
	other := &render.IgnoredRule{Namespace: "t1", Name: "other", Path: "spec.egress[0]", Err: errors.New("x")}
	withIgnored := func(pod string, err error) ruleagent.Outcome {
		o := out(pod, nil, "web")
		o.Ignored = err
		return o
	}
	outs := []ruleagent.Outcome{withIgnored("a", errors.Join(bound, other)), withIgnored("b", bound), out("c", nil, "web")}
	key := types.NamespacedName{Namespace: "t1", Name: "web"}
	e := Summarise(outs)[key]
	want := "rules left out on 2 attachments; the first: pod t1/a interface net1: spec.egress[2]: its destination selectors select too much"
	if e.Attachments != 3 || e.Failure != "" || e.Ignored != want || e.Reason() != ncv1.ReasonApplied || e.Message() != want {
		t.Fatalf("entry %+v (message %q), want 3 attachments, Applied, message %q", e, e.Message(), want)
	}

	objs := []*ncv1.NetworkQoS{{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "web"}}}
	client := &fakeClient{}
	events := record.NewFakeRecorder(10)
	w := &Writer{Node: "n1", Objects: func() ([]*ncv1.NetworkQoS, error) { return objs, nil },
		Client: func(string) Client { return client }, Events: events, Now: time.Now}
	if err := w.Write(context.Background(), outs); err != nil {
		t.Fatal(err)
	}
	if len(client.applied) != 1 || *client.applied[0].Status.Nodes[0].Message != want {
		t.Fatalf("applied %+v, want the entry with message %q", client.applied, want)
	}
	select {
	case ev := <-events.Events:
		if !strings.Contains(ev, "Warning NetworkQoSIgnored node n1: "+want) {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no event for the rules left out")
	}
	// what the API now holds; a third attachment leaves the rule out too
	objs[0].Status.Nodes = []ncv1.NetworkQoSNodeStatus{{Node: "n1", Attachments: 3, Reason: ncv1.ReasonApplied, Message: want}}
	if err := w.Write(context.Background(), append(outs[:2:2], withIgnored("c", bound))); err != nil {
		t.Fatal(err)
	}
	if len(client.applied) != 2 || !strings.HasPrefix(*client.applied[1].Status.Nodes[0].Message, "rules left out on 3 attachments") {
		t.Fatalf("the count did not follow: %d applies", len(client.applied))
	}
	select {
	case ev := <-events.Events:
		t.Errorf("an event at a change of the count: %q", ev)
	default:
	}
}
