package daemon

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/netclass-dev/netclass/api/contract"
)

// An attachment waiting for its network-status gets one Warning Event on
// its pod once it has waited the grace, at a sync the reporter asked for
// when it first saw it; one that stops waiting is forgotten.
func TestUnnamedReporter(t *testing.T) {
	now := time.Unix(1000, 0)
	var scheduled []time.Duration
	events := record.NewFakeRecorder(10)
	r := newUnnamedReporter(events, func() {})
	r.now = func() time.Time { return now }
	r.after = func(d time.Duration, _ func()) { scheduled = append(scheduled, d) }
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "b"}}
	closed := waitingAttachment{pod: pod, key: "sb-b/net1", ifName: "net1", closed: true, why: "annotation x has no entry for interface net1"}
	open := waitingAttachment{pod: pod, key: "sb-b/net2", ifName: "net2", why: "the pod has no x annotation"}
	expect := func(stage string, want ...string) {
		t.Helper()
		expectEvents(t, events, stage, want...)
	}

	r.observe([]waitingAttachment{closed, open})
	expect("first seen")
	if len(scheduled) != 1 || scheduled[0] != NetworkStatusGrace {
		t.Fatalf("syncs scheduled %v, want one after %v", scheduled, NetworkStatusGrace)
	}
	now = now.Add(NetworkStatusGrace / 2)
	for range 100 { // the pod's annotation flaps: net2 named, then not, again and again
		r.observe([]waitingAttachment{closed})
		r.observe([]waitingAttachment{closed, open})
	}
	if len(scheduled) != 1 {
		t.Fatalf("syncs scheduled %v while one was pending, want that one only", scheduled)
	}
	now = now.Add(NetworkStatusGrace/2 - time.Millisecond)
	r.observe([]waitingAttachment{closed, open})
	expect("within the grace")
	now = now.Add(time.Millisecond)
	r.observe([]waitingAttachment{closed, open})
	if len(scheduled) != 2 || scheduled[1] != NetworkStatusGrace/2 {
		t.Fatalf("syncs scheduled %v, want a second for the end of net2's new wait, %v on", scheduled, NetworkStatusGrace/2)
	}
	now = now.Add(NetworkStatusGrace / 2)
	r.observe([]waitingAttachment{closed, open})
	expect("the grace over",
		"Warning "+contract.ReasonNetworkStatusMissing+" interface net1, made by a netclass plugin for Multus, gets no NetworkPolicy or NetworkQoS change; it started closed (portSecurity.startClosed): unless the agent opened it before, it passes nothing, until",
		"Warning "+contract.ReasonNetworkStatusMissing+" interface net2, made by a netclass plugin for Multus, gets no NetworkPolicy or NetworkQoS change, until the pod's network-status names its NetworkAttachmentDefinition: the pod has no x annotation")
	r.observe([]waitingAttachment{closed, open})
	expect("told once")
	r.observe([]waitingAttachment{open}) // net1 named now
	now = now.Add(time.Hour)
	r.observe([]waitingAttachment{closed, open}) // net1 waits again: a new wait
	expect("waiting again, within its grace")
	if len(scheduled) != 3 || scheduled[2] != NetworkStatusGrace {
		t.Errorf("syncs scheduled %v, want a third for net1's new wait", scheduled)
	}
	now = now.Add(NetworkStatusGrace)
	r.observe([]waitingAttachment{closed})
	expect("the new wait over", "interface net1")
}

// expectEvents takes the events recorded so far: one per want, each
// containing it.
func expectEvents(t *testing.T, events *record.FakeRecorder, stage string, want ...string) {
	t.Helper()
	var got []string
	for len(events.Events) > 0 {
		got = append(got, <-events.Events)
	}
	if len(got) != len(want) {
		t.Fatalf("%s: events %q, want %d", stage, got, len(want))
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("%s: event %q, want it to contain %q", stage, got[i], w)
		}
	}
}
