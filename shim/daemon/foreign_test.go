package daemon

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/multus"
	"github.com/netclass-dev/netclass/shim/sandboxes"
)

func statusAnnotation(entries ...multus.Status) map[string]string {
	raw, _ := json.Marshal(entries)
	return map[string]string{multus.AnnotationNetworkStatus: string(raw)}
}

// Records become foreign attachments only for a running sandbox of a
// known pod, named by its network-status or Unnamed whatever its
// annotations (or when the NAD it names is not the record's), and never
// for an interface a claim attached; only the unnamed ones of pods that
// ask Multus for networks, and the mismatched ones, wait for an Event.
func TestMatchForeign(t *testing.T) {
	cfg := json.RawMessage(`{"cniVersion":"1.0.0","name":"n","type":"netclass-bridge","args":{"cni":{"qos":{"dscp":46}}}}`)
	closedCfg := json.RawMessage(`{"cniVersion":"1.0.0","name":"n","type":"netclass-bridge","portSecurity":{"spoofCheck":true,"startClosed":true}}`)
	recs := []*attach.Record{
		{Network: "n", ContainerID: "sb-a", IfName: "net1", NetNS: "/ns/a", HostIf: "h-a", Addresses: []string{"10.7.0.2/24"}, MAC: "02:00:00:00:00:0b", Config: cfg},
		{Network: "n", ContainerID: "sb-a", IfName: "net2", NetNS: "/ns/a"},                    // a claim's (claimed)
		{Network: "n", ContainerID: "sb-gone", IfName: "net1", NetNS: "/ns/x"},                 // no running sandbox: cnitool's, or stopped
		{Network: "n", ContainerID: "sb-b", IfName: "net1", NetNS: "/ns/b", Config: closedCfg}, // b's status has no net1 yet
		{Network: "n", ContainerID: "sb-c", IfName: "net1", NetNS: "/ns/c"},                    // c's UID is another pod's
		{Network: "n", ContainerID: "sb-d", IfName: "net1", NetNS: "/ns/d", HostIf: "h-d"},     // d asks Multus for nothing
		{Network: "n", ContainerID: "sb-e", IfName: "net1", NetNS: "/ns/e"},                    // e's status names a NAD net1 was not made from
	}
	sbs := []sandboxes.Sandbox{
		{Pod: types.NamespacedName{Namespace: "t1", Name: "a"}, UID: "a", ID: "sb-a", NetNS: "/ns/a"},
		{Pod: types.NamespacedName{Namespace: "t1", Name: "b"}, UID: "b", ID: "sb-b", NetNS: "/ns/b"},
		{Pod: types.NamespacedName{Namespace: "t1", Name: "c"}, UID: "c-old", ID: "sb-c", NetNS: "/ns/c"},
		{Pod: types.NamespacedName{Namespace: "t1", Name: "d"}, UID: "d", ID: "sb-d", NetNS: "/ns/d"},
		{Pod: types.NamespacedName{Namespace: "t1", Name: "e"}, UID: "e", ID: "sb-e", NetNS: "/ns/e"},
	}
	pods := map[string]*corev1.Pod{
		"a": {ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "a", UID: "a", Annotations: statusAnnotation(
			multus.Status{Name: "primary", Interface: "eth0", Default: true},
			multus.Status{Name: "t1/nad", Interface: "net1", IPs: []string{"10.7.0.2"}, MAC: "02:00:00:00:00:0a"}, // edited: the record's MAC counts
			multus.Status{Name: "t1/other", Interface: "net2"})}},                                                 // even named so, net2 is the claim's
		"b": {ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "b", UID: "b", Annotations: asks(statusAnnotation(
			multus.Status{Name: "primary", Interface: "eth0", Default: true}))}},
		"c": {ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "c", UID: "c", Annotations: statusAnnotation(
			multus.Status{Name: "t1/nad", Interface: "net1"})}},
		"d": {ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "d", UID: "d"}},
		"e": {ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "e", UID: "e", Annotations: statusAnnotation(
			multus.Status{Name: "t1/other", Interface: "net1"})}},
	}
	get := func(ns, name string, uid types.UID) (*corev1.Pod, bool) {
		p, ok := pods[name]
		return p, ok && p.UID == uid
	}
	claims := []*checkpoint.Claim{{Devices: []checkpoint.Device{{Attachments: []checkpoint.Attachment{{SandboxID: "sb-a", IfName: "net2"}}}}}}
	mismatch := func(r *attach.Record, nad types.NamespacedName) string {
		if nad.Name == "other" {
			return "not " + r.Network + "'s NAD"
		}
		return ""
	}
	got, waiting := matchForeign(recs, sbs, claimed(claims), get, mismatch)
	if len(waiting) != 2 || waiting[0].pod.Name != "b" || waiting[0].key != "sb-b/net1" || waiting[0].ifName != "net1" || !waiting[0].closed ||
		!strings.Contains(waiting[0].why, "no entry for interface net1") || waiting[1].pod.Name != "e" || waiting[1].why != "not n's NAD" {
		t.Errorf("waiting %+v, want b's net1 (closed, its status without net1) and e's (its status naming another NAD)", waiting)
	}
	if len(got) != 4 || got[0].Unnamed || got[1].Pod.Name != "b" || !got[1].Unnamed || got[1].NotMultus || got[1].NAD != (types.NamespacedName{}) || got[1].SandboxID != "sb-b" ||
		got[2].Pod.Name != "d" || !got[2].Unnamed || !got[2].NotMultus || got[2].HostIf != "h-d" || got[3].Pod.Name != "e" || !got[3].Unnamed || got[3].NotMultus || got[3].NAD != (types.NamespacedName{}) {
		t.Fatalf("got foreign attachments %+v, want a's net1, and b's, d's and e's net1 unnamed (d asks Multus for nothing, not waiting: its annotations do not decide whether its attachment is there; e's names a NAD net1 was not made from)", got)
	}
	f := got[0]
	if f.Pod.Name != "a" || f.PodUID != "a" || f.IfName != "net1" || f.NetNS != "/ns/a" || f.HostIf != "h-a" ||
		f.NAD != (types.NamespacedName{Namespace: "t1", Name: "nad"}) || f.MAC != "02:00:00:00:00:0b" || len(f.CIDRs) != 1 {
		t.Errorf("a's net1: %+v", f)
	}
	if f.Base == nil || f.Base.DSCP == nil || *f.Base.DSCP != 46 {
		t.Errorf("a's net1 base QoS %+v, want its args.cni.qos (dscp 46)", f.Base)
	}
}

func asks(a map[string]string) map[string]string {
	a[multus.AnnotationNetworks] = "t1/nad"
	return a
}

func TestRecordedConfig(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		dscp   int
		closed bool
	}{
		{`{"cniVersion":"1.0.0","name":"n","type":"netclass-bridge","qos":{"dscp":10}}`, 10, false},
		{`{"cniVersion":"1.0.0","name":"n","type":"netclass-bridge","qos":{"dscp":10},"args":{"cni":{"qos":{"dscp":46}}}}`, 46, false},
		{`{"cniVersion":"1.0.0","name":"n","type":"netclass-bridge"}`, -1, false},
		{`{"cniVersion":"1.0.0","name":"n","type":"netclass-vxlan","vni":7,"local":"10.0.0.1","portSecurity":{"spoofCheck":true,"startClosed":true}}`, -1, true},
		{`{"cniVersion":"1.0.0","name":"n","type":"netclass-bridge","portSecurity":{"spoofCheck":true}}`, -1, false},
		{`{"type":"bridge"}`, -1, false},
		{``, -1, false},
	} {
		got, closed := recordedConfig([]byte(tc.raw))
		if closed != tc.closed {
			t.Errorf("%s: startClosed %v, want %v", tc.raw, closed, tc.closed)
		}
		switch {
		case tc.dscp < 0 && got != nil:
			t.Errorf("%s: %+v, want none", tc.raw, got)
		case tc.dscp >= 0 && (got == nil || got.DSCP == nil || *got.DSCP != tc.dscp):
			t.Errorf("%s: %+v, want dscp %d", tc.raw, got, tc.dscp)
		}
	}
	// netclass-qos chained after a foreign plugin: its qos and the admin's
	// dscpPolicy, which the agent's plans must keep.
	got, _ := recordedConfig([]byte(`{"cniVersion":"1.0.0","name":"n","type":"netclass-qos","qos":{"dscp":10},"dscpPolicy":{"allowed":[{"first":0,"last":40}]}}`))
	if got == nil || got.DSCP == nil || *got.DSCP != 10 || got.Policy == nil || got.Policy.Allows(46) {
		t.Errorf("a netclass-qos record: %+v, want dscp 10 under the policy 0-40", got)
	}
}

// A record appearing or going in the store asks for a sync; nothing else
// does.
func TestWatchRecordsTriggersOnChange(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := make(chan struct{}, 10)
	go watchRecords(ctx, dir, 10*time.Millisecond, func() { changed <- struct{}{} })
	expect := func(what string, want bool) {
		t.Helper()
		select {
		case <-changed:
			if !want {
				t.Fatalf("%s: a sync was asked for", what)
			}
		case <-time.After(200 * time.Millisecond):
			if want {
				t.Fatalf("%s: no sync asked for", what)
			}
		}
	}
	expect("nothing changed", false)
	if err := (attach.Store{Dir: dir}).Put(&attach.Record{Network: "n", ContainerID: "sb", IfName: "net1"}); err != nil {
		t.Fatal(err)
	}
	expect("a record written", true)
	expect("nothing changed since", false)
	if err := os.Remove(filepath.Join(dir, "n", "sb.net1.json")); err != nil {
		t.Fatal(err)
	}
	expect("a record removed", true)
}
