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
