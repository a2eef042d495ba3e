package prepare

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/ptr"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/network"
)

type fakeNetworks map[string]network.Offer

func (f fakeNetworks) Lookup(d string) (network.Offer, bool) { n, ok := f[d]; return n, ok }

type fakePods map[string]*corev1.Pod

func (f fakePods) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	if p, ok := f[ns+"/"+name]; ok {
		return p, nil
	}
	return nil, errors.New("not found")
}

type fakeQoS []*ncv1.NetworkQoS

func (f fakeQoS) NetworkQoS(string) ([]*ncv1.NetworkQoS, error) { return f, nil }

type fakeDetacher struct{ detached []types.UID }

func (f *fakeDetacher) Detach(_ context.Context, c *checkpoint.Claim) error {
	f.detached = append(f.detached, c.UID)
	return nil
}

type fakeReporter struct {
	failed     []string
	warnings   []string
	unprepared []string
}

func (f *fakeReporter) PrepareFailed(_ context.Context, c *resourceapi.ResourceClaim, devs []checkpoint.Device, err error) {
	f.failed = append(f.failed, c.Name+": "+err.Error())
}
func (f *fakeReporter) Warn(_ context.Context, c *resourceapi.ResourceClaim, reason, msg string) {
	f.warnings = append(f.warnings, reason+": "+msg)
}
func (f *fakeReporter) Unprepared(_ context.Context, c kubeletplugin.NamespacedObject) {
	f.unprepared = append(f.unprepared, c.Name)
}

const bridgeConf = `{"cniVersion":"1.1.0","name":"blue","type":"netclass-bridge","bridge":"blue0","ipam":{"type":"host-local","ranges":[[{"subnet":"10.10.1.0/24"}]]}}`
const sriovConf = `{"cniVersion":"1.1.0","name":"fast","type":"netclass-sriov","master":"pf0"}`
const vxlanConf = `{"cniVersion":"1.1.0","name":"tenant-a_red","type":"netclass-vxlan","vni":100,"local":"10.250.0.1"}`

func networks() fakeNetworks {
	return fakeNetworks{
		"blue-dev": {Network: network.Network{Ref: attachment.NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "blue"}, Type: "netclass-bridge", Config: json.RawMessage(bridgeConf), AllowStaticAddresses: true}},
		"red-dev":  {Network: network.Network{Ref: attachment.NetworkRef{Class: "nets", Kind: "Network", Namespace: "tenant-a", Name: "red"}, Type: "netclass-vxlan", Config: json.RawMessage(vxlanConf)}},
		"vf-dev": {Network: network.Network{Ref: attachment.NetworkRef{Class: "netclass", Kind: "PodNetwork", Name: "fast"}, Type: "netclass-sriov", Config: json.RawMessage(sriovConf), Master: "pf0"},
			DeviceID: "0000:03:00.2"},
	}
}

func opaque(source resourceapi.AllocationConfigSource, requests []string, raw string) resourceapi.DeviceAllocationConfiguration {
	return resourceapi.DeviceAllocationConfiguration{Source: source, Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: "netclass.dev", Parameters: runtime.RawExtension{Raw: []byte(raw)}}}}
}

func claim(ns, name, uid string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{
			Allocation:  &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod-a", UID: "pod-a-uid"}},
		},
	}
}

func result(request, driver, device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: driver, Pool: "node1", Device: device}
}

func pod(ns string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pod-a", UID: "pod-a-uid", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{
			{Name: "first", ResourceClaimName: ptr.To("other")},
			{Name: "net", ResourceClaimTemplateName: ptr.To("tmpl")},
		}},
		Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "net", ResourceClaimName: ptr.To("c1")}}},
	}
}

type harness struct {
	plugin   *Plugin
	store    *checkpoint.Store
	detacher *fakeDetacher
	reporter *fakeReporter
}

func newHarness(t *testing.T) *harness {
	store, problems := checkpoint.Open(t.TempDir())
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	h := &harness{store: store, detacher: &fakeDetacher{}, reporter: &fakeReporter{}}
	h.plugin = &Plugin{Pool: "node1", Networks: networks(), Store: store,
		Pods: fakePods{"default/pod-a": pod("default"), "tenant-a/pod-a": pod("tenant-a"), "tenant-b/pod-a": pod("tenant-b")},
		QoS:  fakeQoS{}, Detacher: h.detacher, Reporter: h.reporter}
	return h
}

func TestPrepare(t *testing.T) {
	h := newHarness(t)
	shareID := types.UID("share-1")
	res := result("net", "netclass.dev", "blue-dev")
	res.ShareID = &shareID
	c1 := claim("default", "c1", "uid-1", res, result("gpu", "gpu.example.com", "gpu0"))
	c1.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaque(resourceapi.AllocationConfigSourceClaim, []string{"net"}, `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","ips":["10.10.1.50/24"],"qos":{"dscp":46}}`),
		opaque(resourceapi.AllocationConfigSourceClass, nil, `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"data0","qos":{"dscp":10}}`),
		opaque(resourceapi.AllocationConfigSourceClaim, []string{"gpu"}, `not even json`),
	}
	c2 := claim("tenant-b", "c2", "uid-2", result("net", "netclass.dev", "red-dev"))
	c3 := claim("default", "c3", "uid-3", result("net", "netclass.dev", "gone-dev"))
	c4 := claim("default", "c4", "uid-4")
	c4.Status.Allocation = nil
	got, err := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c1, c2, c3, c4})
	if err != nil {
		t.Fatal(err)
	}
	if r := got["uid-1"]; r.Err != nil || len(r.Devices) != 1 || r.Devices[0].DeviceName != "blue-dev" || *r.Devices[0].ShareID != shareID {
		t.Fatalf("c1: %+v", r)
	}
	var nsErr *NamespaceError
	if r := got["uid-2"]; !errors.As(r.Err, &nsErr) || !strings.Contains(r.Err.Error(), "only usable by claims of its own namespace") {
		t.Fatalf("c2 error = %v", r.Err)
	}
	var devErr *DeviceError
	if r := got["uid-3"]; r.Err == nil || !strings.Contains(r.Err.Error(), "not offered on this node") || !errors.As(r.Err, &devErr) || devErr.FailedDevice() != "gone-dev" {
		t.Fatalf("c3 error = %v, want one naming device gone-dev (its status entry's)", r.Err)
	}
	if r := got["uid-4"]; r.Err == nil || !strings.Contains(r.Err.Error(), "not allocated") {
		t.Fatalf("c4 error = %v", r.Err)
	}
	if len(h.reporter.failed) != 3 {
		t.Fatalf("reported failures: %v", h.reporter.failed)
	}
	rec, ok := h.store.Get("uid-1")
	if !ok || len(rec.Devices) != 1 {
		t.Fatalf("checkpoint of c1: %+v", rec)
	}
	d := rec.Devices[0]
	if d.InterfaceName != "data0" || d.ShareID != "share-1" || len(d.IPs) != 1 || d.Network.Name != "blue" {
		t.Fatalf("device record: %+v", d)
	}
	if !strings.Contains(string(d.ConfList), `"qos":{"dscp":46}`) || !strings.Contains(string(d.ConfList), `"ips":true`) {
		t.Fatalf("conflist: %s", d.ConfList)
	}
	if rec.Pods[0].Order != 1 {
		t.Fatalf("pod order %d, want 1 (the template claim is second in the pod)", rec.Pods[0].Order)
	}
	for _, uid := range []types.UID{"uid-2", "uid-3", "uid-4"} {
		if _, ok := h.store.Get(uid); ok {
			t.Errorf("failed claim %s was checkpointed", uid)
		}
	}

	// Idempotent: a second Prepare gives the same answer from the checkpoint,
	// even after the network is gone.
	h.plugin.Networks = fakeNetworks{}
	again, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c1})
	if r := again["uid-1"]; r.Err != nil || len(r.Devices) != 1 || r.Devices[0].DeviceName != "blue-dev" {
		t.Fatalf("second prepare: %+v", r)
	}
}

func TestPrepareSameNamespaceAndBadConfig(t *testing.T) {
	h := newHarness(t)
	ok := claim("tenant-a", "c1", "uid-1", result("net", "netclass.dev", "red-dev"))
	bad := claim("default", "c2", "uid-2", result("net", "netclass.dev", "blue-dev"))
	bad.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaque(resourceapi.AllocationConfigSourceClaim, nil, `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"eth0","mac":"ff:ff:ff:ff:ff:ff"}`),
	}
	got, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{ok, bad})
	if got["uid-1"].Err != nil {
		t.Fatalf("claim in the network's namespace: %v", got["uid-1"].Err)
	}
	err := got["uid-2"].Err
	if err == nil || !strings.Contains(err.Error(), "interfaceName") || !strings.Contains(err.Error(), "unicast") {
		t.Fatalf("bad opaque config error = %v, want both problems", err)
	}
}

func TestUnprepare(t *testing.T) {
	h := newHarness(t)
	c1 := claim("default", "c1", "uid-1", result("net", "netclass.dev", "blue-dev"))
	if got, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c1}); got["uid-1"].Err != nil {
		t.Fatal(got["uid-1"].Err)
	}
	// A fresh process: a new plugin over the same checkpoint directory.
	fresh := *h.plugin
	objs := []kubeletplugin.NamespacedObject{
		{NamespacedName: types.NamespacedName{Namespace: "default", Name: "c1"}, UID: "uid-1"},
		{NamespacedName: types.NamespacedName{Namespace: "default", Name: "never"}, UID: "uid-9"},
	}
	for round := range 2 {
		got, err := fresh.UnprepareResourceClaims(context.Background(), objs)
		if err != nil || got["uid-1"] != nil || got["uid-9"] != nil {
			t.Fatalf("round %d: %v %v", round, got, err)
		}
	}
	if len(h.detacher.detached) != 1 || h.detacher.detached[0] != "uid-1" {
		t.Fatalf("detached %v", h.detacher.detached)
	}
	if _, ok := h.store.Get("uid-1"); ok {
		t.Fatal("record left after unprepare")
	}
	if len(h.reporter.unprepared) != 1 {
		t.Fatalf("unprepared reported %v", h.reporter.unprepared)
	}
}

func TestOpaqueConfigScopes(t *testing.T) {
	configs := []resourceapi.DeviceAllocationConfiguration{
		opaque(resourceapi.AllocationConfigSourceClaim, []string{"net"}, `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"sub"}`),
		{Source: resourceapi.AllocationConfigSourceClaim, DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "other.example", Parameters: runtime.RawExtension{Raw: []byte("garbage")}}}},
	}
	c := claim("default", "c1", "uid-1")
	c.Status.Allocation.Devices.Config = configs
	got, err := OpaqueConfig(c, "net/fast")
	if err != nil || got == nil || got.InterfaceName != "sub" {
		t.Fatalf("subrequest: %+v, %v", got, err)
	}
	if got, err := OpaqueConfig(c, "other"); err != nil || got != nil {
		t.Fatalf("unrelated request: %+v, %v", got, err)
	}
}

// An opaque configuration netclass refuses is named by the field the user
// wrote: the allocation lists the DeviceClass's entries first and leaves out
// the claim's entries for subrequests not chosen, so its index is not the
// claim's.
func TestOpaqueConfigErrorNamesTheClaimsField(t *testing.T) {
	const good = `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"sub"}`
	const bad = `{"apiVersion":"netclass.dev/v1alpha1","kind":"AttachmentConfig","interfaceName":"sub","bogus":1}`
	c := claim("default", "c1", "uid-1")
	for _, e := range []struct {
		requests []string
		raw      string
	}{{nil, good}, {[]string{"net/slow"}, good}, {[]string{"net"}, bad}} {
		c.Spec.Devices.Config = append(c.Spec.Devices.Config, resourceapi.DeviceClaimConfiguration{Requests: e.requests,
			DeviceConfiguration: opaque(resourceapi.AllocationConfigSourceClaim, nil, e.raw).DeviceConfiguration})
	}
	c.Status.Allocation.Devices.Config = []resourceapi.DeviceAllocationConfiguration{
		opaque(resourceapi.AllocationConfigSourceClass, []string{"net"}, good),
		opaque(resourceapi.AllocationConfigSourceClaim, nil, good),
		opaque(resourceapi.AllocationConfigSourceClaim, []string{"net"}, bad),
	}
	_, err := OpaqueConfig(c, "net/fast")
	if err == nil || !strings.HasPrefix(err.Error(), "spec.devices.config[2].opaque.parameters: ") {
		t.Fatalf("got %v, want the error to name spec.devices.config[2]", err)
	}
	c.Status.Allocation.Devices.Config[0] = opaque(resourceapi.AllocationConfigSourceClass, []string{"net"}, bad)
	if _, err := OpaqueConfig(c, "net/fast"); err == nil || !strings.HasPrefix(err.Error(), "the DeviceClass's opaque configuration: ") {
		t.Fatalf("got %v, want the error to name the DeviceClass", err)
	}
}

func TestPrepareSRIOV(t *testing.T) {
	h := newHarness(t)
	c := claim("default", "c1", "uid-1", result("net", "netclass.dev", "vf-dev"))
	got, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	if got["uid-1"].Err != nil {
		t.Fatal(got["uid-1"].Err)
	}
	rec, _ := h.store.Get("uid-1")
	d := rec.Devices[0]
	if d.DeviceID != "0000:03:00.2" || !strings.Contains(string(d.ConfList), `"deviceID":true`) {
		t.Fatalf("the VF is not handed to the plugin: %+v %s", d, d.ConfList)
	}
}

// racingPods plays the sandbox path: while Prepare reads pod B (between the
// record's read and its write, where the old Get+Put lost updates), pod A's
// attachment is recorded.
type racingPods struct {
	fakePods
	during func()
}

func (r racingPods) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	if name == "pod-b" && r.during != nil {
		r.during()
	}
	return r.fakePods.Pod(ctx, ns, name)
}

func podNamed(ns, name string, uid types.UID) *corev1.Pod {
	p := pod(ns)
	p.Name, p.UID = name, uid
	return p
}

func reserve(c *resourceapi.ResourceClaim, pods ...*corev1.Pod) {
	c.Status.ReservedFor = nil
	for _, p := range pods {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: p.Name, UID: p.UID})
	}
}

// TestSharedClaimPreparedWhileAttaching: a shared claim prepared again for pod
// B while pod A's attachment is being recorded keeps both.
func TestSharedClaimPreparedWhileAttaching(t *testing.T) {
	h := newHarness(t)
	a, b := podNamed("default", "pod-a", "pod-a-uid"), podNamed("default", "pod-b", "pod-b-uid")
	c1 := claim("default", "c1", "uid-1", result("net", "netclass.dev", "blue-dev"))
	if got, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c1}); got["uid-1"].Err != nil {
		t.Fatal(got["uid-1"].Err)
	}
	attachA := func() {
		err := h.store.Update("uid-1", func(r *checkpoint.Claim) error {
			r.Devices[0].SetAttachment(checkpoint.Attachment{PodUID: a.UID, SandboxID: "sandbox-a", IfName: "net1", State: checkpoint.Attached})
			return nil
		})
		if err != nil {
			t.Errorf("record pod A's attachment: %v", err)
		}
	}
	h.plugin.Pods = racingPods{fakePods: fakePods{"default/pod-a": a, "default/pod-b": b}, during: attachA}
	reserve(c1, a, b)
	if got, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c1}); got["uid-1"].Err != nil {
		t.Fatal(got["uid-1"].Err)
	}
	rec, _ := h.store.Get("uid-1")
	if !rec.HasPod(b.UID) {
		t.Errorf("pod B is not recorded: %+v", rec.Pods)
	}
	if _, ok := rec.Devices[0].Attachment("sandbox-a"); !ok {
		t.Errorf("pod A's attachment recorded during Prepare was lost: %+v", rec.Devices[0].Attachments)
	}
}

// TestSharedClaimNewPodChecksTheNetwork: preparing a shared claim for another
// pod fails like a first Prepare once its network is no longer offered, and
// the kubelet's retry for the same pods still gets the recorded answer.
func TestSharedClaimNewPodChecksTheNetwork(t *testing.T) {
	h := newHarness(t)
	a, b := podNamed("default", "pod-a", "pod-a-uid"), podNamed("default", "pod-b", "pod-b-uid")
	h.plugin.Pods = fakePods{"default/pod-a": a, "default/pod-b": b}
	c1 := claim("default", "c1", "uid-1", result("net", "netclass.dev", "blue-dev"))
	if got, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c1}); got["uid-1"].Err != nil {
		t.Fatal(got["uid-1"].Err)
	}
	h.plugin.Networks = fakeNetworks{}
	if got, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c1}); got["uid-1"].Err != nil {
		t.Fatalf("the same pod's retry: %v", got["uid-1"].Err)
	}
	reserve(c1, a, b)
	got, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c1})
	var notOffered *NotOfferedError
	if err := got["uid-1"].Err; !errors.As(err, &notOffered) {
		t.Fatalf("prepare for pod B on a withdrawn network: %v", err)
	}
	if rec, _ := h.store.Get("uid-1"); rec.HasPod(b.UID) {
		t.Errorf("pod B was recorded on a withdrawn network")
	}
}

// TestSharedClaimRecordStaysBounded: pods that left the claim and have no
// attachment are forgotten; one whose DEL is still pending is kept.
func TestSharedClaimRecordStaysBounded(t *testing.T) {
	h := newHarness(t)
	c1 := claim("default", "c1", "uid-1", result("net", "netclass.dev", "blue-dev"))
	pods := fakePods{}
	h.plugin.Pods = pods
	var last *corev1.Pod
	for i := range 50 {
		p := podNamed("default", "pod-"+string(rune('a'+i%26))+strings.Repeat("x", i/26), types.UID("uid-pod-"+strings.Repeat("x", i)))
		pods["default/"+p.Name] = p
		reserve(c1, p)
		if got, _ := h.plugin.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c1}); got["uid-1"].Err != nil {
			t.Fatal(got["uid-1"].Err)
		}
		if i == 10 { // this one's interface is not deleted yet
			last = p
			if err := h.store.Update("uid-1", func(r *checkpoint.Claim) error {
				r.Devices[0].SetAttachment(checkpoint.Attachment{PodUID: p.UID, SandboxID: "s10", IfName: "net1", State: checkpoint.Attached})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rec, _ := h.store.Get("uid-1")
	if len(rec.Pods) != 2 || !rec.HasPod(last.UID) {
		t.Fatalf("record keeps %d pods, want the current one and the one with an attachment: %+v", len(rec.Pods), rec.Pods)
	}
}

// slowPods never answers for one pod until the caller gives up.
type slowPods struct {
	fakePods
	slow string
}

func (s slowPods) Pod(ctx context.Context, ns, name string) (*corev1.Pod, error) {
	if ns+"/"+name == s.slow {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.fakePods.Pod(ctx, ns, name)
}

// TestSlowClaimDoesNotStallOthers: a claim whose pod cannot be read fails at
// its own deadline, and the other claims of the call are prepared.
func TestSlowClaimDoesNotStallOthers(t *testing.T) {
	h := newHarness(t)
	h.plugin.ClaimTimeout = 50 * time.Millisecond
	h.plugin.Pods = slowPods{fakePods: fakePods{"default/pod-a": pod("default"), "tenant-a/pod-a": pod("tenant-a")}, slow: "tenant-a/pod-a"}
	slow := claim("tenant-a", "slow", "uid-slow", result("net", "netclass.dev", "red-dev"))
	fine := claim("default", "fine", "uid-fine", result("net", "netclass.dev", "blue-dev"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, _ := h.plugin.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{slow, fine})
	if err := got["uid-slow"].Err; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow claim: %v, want its deadline", err)
	}
	if r := got["uid-fine"]; r.Err != nil || len(r.Devices) != 1 {
		t.Fatalf("the other claim: %+v", r)
	}
}
