package nri

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/cni"
)

type fakeCNI struct {
	mu      sync.Mutex
	calls   []string
	failAdd map[string]error         // ifName → error
	block   bool                     // ADD waits for its context
	gate    map[string]chan struct{} // network → ADD waits until closed (or its context ends)
	cached  map[string]cni.Result
	gc      map[string][]string
	failDel int // the next failDel DELs fail
	// warn are the plugins' warnings an ADD of the interface returns.
	warn map[string][]string
}

func (f *fakeCNI) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

// waitFor polls, with a deadline, until call was made.
func (f *fakeCNI) waitFor(t *testing.T, call string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Contains(f.Calls(), call) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in %v", call, f.Calls())
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

func (f *fakeCNI) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func netName(conf []byte) string {
	var l struct{ Name string }
	json.Unmarshal(conf, &l)
	return l.Name
}

func (f *fakeCNI) Add(ctx context.Context, conf []byte, a cni.Attachment) (cni.Result, error) {
	f.record(fmt.Sprintf("ADD %s %s %s", netName(conf), a.ContainerID, a.IfName))
	if f.block {
		<-ctx.Done()
		return cni.Result{}, ctx.Err()
	}
	if g, ok := f.gate[netName(conf)]; ok {
		select {
		case <-g:
		case <-ctx.Done():
			return cni.Result{}, ctx.Err()
		}
	}
	if err := f.failAdd[a.IfName]; err != nil {
		return cni.Result{}, err
	}
	return cni.Result{InterfaceName: a.IfName, MAC: "02:00:00:00:00:01", IPs: []string{"10.0.0." + a.IfName[3:] + "/24"}, Warnings: f.warn[a.IfName]}, nil
}

func (f *fakeCNI) Del(_ context.Context, conf []byte, a cni.Attachment) error {
	f.record(fmt.Sprintf("DEL %s %s %s", netName(conf), a.ContainerID, a.IfName))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failDel > 0 {
		f.failDel--
		return errors.New("plugin failed")
	}
	return nil
}

func (f *fakeCNI) GC(_ context.Context, conf []byte, valid []cni.Attachment) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gc == nil {
		f.gc = map[string][]string{}
	}
	var ids []string
	for _, v := range valid {
		ids = append(ids, v.ContainerID+"/"+v.IfName)
	}
	slices.Sort(ids)
	f.gc[netName(conf)] = ids
	return nil
}

func (f *fakeCNI) Cached(_ []byte, a cni.Attachment) (cni.Result, bool, error) {
	r, ok := f.cached[a.ContainerID+"/"+a.IfName]
	return r, ok, nil
}

type fakeReporter struct {
	mu       sync.Mutex
	statuses map[string][]string
	events   []string
}

func (f *fakeReporter) Attached(_ context.Context, c *checkpoint.Claim, failures map[string]error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s []string
	for _, d := range c.Devices {
		if err := failures[d.Device]; err != nil {
			s = append(s, d.Device+" failed")
			continue
		}
		for _, a := range d.Attachments {
			if a.State == checkpoint.Attached {
				s = append(s, d.Device+" "+a.Result.InterfaceName)
			}
		}
	}
	if f.statuses == nil {
		f.statuses = map[string][]string{}
	}
	f.statuses[c.Name] = s
	return nil
}

func (f *fakeReporter) PodEvent(p checkpoint.Pod, eventType, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, reason+": "+message)
}

func conf(name string) json.RawMessage {
	return json.RawMessage(`{"cniVersion":"1.1.0","name":"` + name + `","plugins":[{"type":"netclass-bridge"}]}`)
}

func claimRec(uid, name string, order int, pod types.UID, devices ...checkpoint.Device) *checkpoint.Claim {
	return &checkpoint.Claim{UID: types.UID(uid), Namespace: "ns", Name: name,
		Pods: []checkpoint.Pod{{UID: pod, Namespace: "ns", Name: "pod-" + string(pod), Order: order}}, Devices: devices}
}

func dev(name, ifName string) checkpoint.Device {
	return checkpoint.Device{Request: "r", Pool: "node", Device: name + "-dev", InterfaceName: ifName,
		Network: attachment.NetworkRef{Kind: "PodNetwork", Name: name}, ConfList: conf(name)}
}

func TestPlan(t *testing.T) {
	claims := []*checkpoint.Claim{
		claimRec("c2", "b-second", 1, "p", dev("green", ""), dev("red", "net1")),
		claimRec("c1", "a-first", 0, "p", dev("blue", ""), dev("data", "data0")),
		claimRec("c3", "other-pod", 0, "q", dev("x", "")),
	}
	steps, err := Plan(claims, "p")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range steps {
		got = append(got, s.Device().Network.Name+"="+s.IfName)
	}
	if strings.Join(got, ",") != "blue=net2,data=data0,green=net3,red=net1" {
		t.Fatalf("plan %v", got)
	}
	claims[0].Devices[0].InterfaceName = "data0"
	if _, err := Plan(claims, "p"); err == nil || !strings.Contains(err.Error(), "configured twice") {
		t.Fatalf("duplicate names: %v", err)
	}
}

type harness struct {
	store    *checkpoint.Store
	cni      *fakeCNI
	reporter *fakeReporter
	plugin   *Plugin
	timings  chan Timing
	netns    string
}

func newHarness(t *testing.T) *harness {
	store, problems := checkpoint.Open(t.TempDir())
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	h := &harness{store: store, cni: &fakeCNI{cached: map[string]cni.Result{}}, reporter: &fakeReporter{}, timings: make(chan Timing, 10)}
	h.plugin = NewPlugin(context.Background(), store, h.cni, h.reporter)
	h.plugin.Observer = func(tm Timing) { h.timings <- tm }
	h.netns = filepath.Join(t.TempDir(), "netns")
	os.WriteFile(h.netns, nil, 0o600)
	return h
}

func (h *harness) sandbox(id string, pod types.UID) *api.PodSandbox {
	return &api.PodSandbox{Id: id, Uid: string(pod), Namespace: "ns", Name: "pod-" + string(pod),
		Linux: &api.LinuxPodSandbox{Namespaces: []*api.LinuxNamespace{{Type: "network", Path: h.netns}}}}
}

func (h *harness) put(t *testing.T, c *checkpoint.Claim) {
	t.Helper()
	if err := h.store.Put(c); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) timing(t *testing.T) Timing {
	t.Helper()
	select {
	case tm := <-h.timings:
		return tm
	case <-time.After(10 * time.Second):
		t.Fatal("no timing reported")
	}
	return Timing{}
}

func TestRunAndStop(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p", dev("blue", "")))
	h.put(t, claimRec("c2", "b", 1, "p", dev("red", "")))
	if err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb1", "p")); err != nil {
		t.Fatal(err)
	}
	tm := h.timing(t)
	if tm.Attachments != 2 || tm.Err != nil || tm.Add <= 0 || tm.Total < tm.Add || tm.Budget != 2*time.Second {
		t.Fatalf("timing %+v", tm)
	}
	if got := h.cni.Calls(); !slices.Equal(got, []string{"ADD blue sb1 net1", "ADD red sb1 net2"}) {
		t.Fatalf("calls %v", got)
	}
	c1, _ := h.store.Get("c1")
	a := c1.Devices[0].Attachments
	if len(a) != 1 || a[0].State != checkpoint.Attached || a[0].Result.IPs[0] != "10.0.0.1/24" || a[0].NetNS != h.netns {
		t.Fatalf("checkpoint %+v", a)
	}
	h.plugin.Wait()
	if !slices.Equal(h.reporter.statuses["a"], []string{"blue-dev net1"}) || !slices.Equal(h.reporter.statuses["b"], []string{"red-dev net2"}) {
		t.Fatalf("statuses %v", h.reporter.statuses)
	}
	// A pod without claims costs nothing.
	if err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb9", "other")); err != nil {
		t.Fatal(err)
	}
	if err := h.plugin.StopPodSandbox(context.Background(), h.sandbox("sb1", "p")); err != nil {
		t.Fatal(err)
	}
	if err := h.plugin.RemovePodSandbox(context.Background(), h.sandbox("sb1", "p")); err != nil {
		t.Fatal(err)
	}
	if got := h.cni.Calls()[2:]; !slices.Equal(got, []string{"DEL blue sb1 net1", "DEL red sb1 net2"}) {
		t.Fatalf("stop calls %v", got)
	}
	for _, uid := range []types.UID{"c1", "c2"} {
		c, _ := h.store.Get(uid)
		if len(c.Devices[0].Attachments) != 0 {
			t.Fatalf("%s keeps attachments after stop: %+v", uid, c.Devices[0].Attachments)
		}
	}
}

// TestPluginWarningsBecomePodEvents: what a plugin warned of while
// attaching (the default queue missing from the kernel) is a Warning Event
// on the pod, naming the interface and the network.
func TestPluginWarningsBecomePodEvents(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p", dev("blue", ""), dev("red", "")))
	h.cni.warn = map[string][]string{"net2": {"the egress of \"net2\" is shaped by tbf alone"}}
	if err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb1", "p")); err != nil {
		t.Fatal(err)
	}
	h.timing(t)
	h.plugin.Wait()
	want := []string{EventAttachWarning + `: interface net2 (PodNetwork red): the egress of "net2" is shaped by tbf alone`}
	if !slices.Equal(h.reporter.events, want) {
		t.Fatalf("events %q, want %q", h.reporter.events, want)
	}
}

func TestRunFailureRollsBack(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p", dev("blue", ""), dev("red", "")))
	h.cni.failAdd = map[string]error{"net2": errors.New("no addresses left")}
	err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb1", "p"))
	if err == nil || !strings.Contains(err.Error(), "no addresses left") || !strings.Contains(err.Error(), "PodNetwork red") {
		t.Fatalf("error = %v", err)
	}
	h.timing(t)
	h.plugin.Wait()
	rolledBack(t, h)
}

// rolledBack checks a sandbox of pod p whose second attachment (claim c1's
// red, net2) failed: both were taken back, and the failure is on the pod
// and in the claim's status.
func rolledBack(t *testing.T, h *harness) {
	t.Helper()
	want := []string{"ADD blue sb1 net1", "ADD red sb1 net2", "DEL red sb1 net2", "DEL blue sb1 net1"}
	if got := h.cni.Calls(); !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	c, _ := h.store.Get("c1")
	if len(c.Devices[0].Attachments)+len(c.Devices[1].Attachments) != 0 {
		t.Fatalf("attachments left after rollback: %+v", c.Devices)
	}
	if len(h.reporter.events) != 1 || !strings.Contains(h.reporter.events[0], "NetworkAttachFailed") {
		t.Fatalf("events %v", h.reporter.events)
	}
	if !slices.Equal(h.reporter.statuses["a"], []string{"red-dev failed"}) {
		t.Fatalf("status %v", h.reporter.statuses)
	}
}

func TestRunStaysWithinBudget(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p", dev("blue", "")))
	h.cni.block = true
	h.plugin.setBudget(func() time.Duration { return 400 * time.Millisecond })
	h.plugin.Margin = 100 * time.Millisecond
	start := time.Now()
	err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb1", "p"))
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "NRI's budget") {
		t.Fatalf("error = %v", err)
	}
	if took > 400*time.Millisecond {
		t.Fatalf("RunPodSandbox took %v, beyond the 400 ms budget", took)
	}
	h.plugin.Wait()
}

func TestHostNetworkPod(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p", dev("blue", "")))
	sb := h.sandbox("sb1", "p")
	sb.Linux.Namespaces = nil
	if err := h.plugin.RunPodSandbox(context.Background(), sb); err == nil || !strings.Contains(err.Error(), "hostNetwork") {
		t.Fatalf("error = %v", err)
	}
	h.plugin.Wait()
}

func TestReconcile(t *testing.T) {
	h := newHarness(t)
	// c1: attached to a sandbox that is gone → DEL.
	gone := claimRec("c1", "gone", 0, "p1", dev("blue", ""))
	gone.Devices[0].Attachments = []checkpoint.Attachment{{PodUID: "p1", SandboxID: "sb-gone", NetNS: "/nonexistent", IfName: "net1", State: checkpoint.Attached, Result: &checkpoint.Result{InterfaceName: "net1"}}}
	// c2: ADD interrupted but completed (cached) → adopted.
	done := claimRec("c2", "done", 0, "p2", dev("blue", ""))
	done.Devices[0].Attachments = []checkpoint.Attachment{{PodUID: "p2", SandboxID: "sb2", NetNS: h.netns, IfName: "net1", State: checkpoint.Adding}}
	h.cni.cached["sb2/net1"] = cni.Result{InterfaceName: "net1", IPs: []string{"10.0.0.9/24"}}
	// c3: ADD interrupted, not completed → DEL, then ADD again.
	half := claimRec("c3", "half", 0, "p3", dev("red", ""))
	half.Devices[0].Attachments = []checkpoint.Attachment{{PodUID: "p3", SandboxID: "sb3", NetNS: h.netns, IfName: "net1", State: checkpoint.Adding}}
	// c4: pod started while the daemon was away → ADD.
	late := claimRec("c4", "late", 0, "p4", dev("red", ""))
	for _, c := range []*checkpoint.Claim{gone, done, half, late} {
		h.put(t, c)
	}
	pods := []*api.PodSandbox{h.sandbox("sb2", "p2"), h.sandbox("sb3", "p3"), h.sandbox("sb4", "p4")}
	var secured []string // the attachments given their policy (their ports open)
	h.plugin.Secure = func(_ context.Context, _ *checkpoint.Claim, _ *checkpoint.Device, _ checkpoint.Pod, at checkpoint.Attachment) error {
		secured = append(secured, at.SandboxID)
		return nil
	}
	h.plugin.Reconcile(context.Background(), pods)
	slices.Sort(secured)
	if want := []string{"sb2", "sb3", "sb4"}; !slices.Equal(secured, want) {
		t.Errorf("secured %v, want %v: an adopted or redone attachment would stay closed, or open without its policy", secured, want)
	}
	calls := h.cni.Calls()
	slices.Sort(calls)
	want := []string{"ADD red sb3 net1", "ADD red sb4 net1", "DEL blue sb-gone net1", "DEL red sb3 net1"}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	for uid, wantState := range map[types.UID]int{"c1": 0, "c2": 1, "c3": 1, "c4": 1} {
		c, _ := h.store.Get(uid)
		if len(c.Devices[0].Attachments) != wantState {
			t.Fatalf("%s attachments %+v", uid, c.Devices[0].Attachments)
		}
		for _, a := range c.Devices[0].Attachments {
			if a.State != checkpoint.Attached || a.Result == nil {
				t.Fatalf("%s attachment not settled: %+v", uid, a)
			}
		}
	}
	if got := h.cni.gc["blue"]; !slices.Equal(got, []string{"sb2/net1"}) {
		t.Fatalf("GC of blue kept %v", got)
	}
	if got := h.cni.gc["red"]; !slices.Equal(got, []string{"sb3/net1", "sb4/net1"}) {
		t.Fatalf("GC of red kept %v", got)
	}
	// GC runs once per process; a reconnect reconciles again without GC.
	h.cni.gc = nil
	h.plugin.Reconcile(context.Background(), pods)
	if h.cni.gc != nil {
		t.Fatal("GC ran a second time")
	}
	if len(h.cni.Calls()) != 4 {
		t.Fatalf("a second reconcile changed things: %v", h.cni.Calls())
	}
}

// A long reconciliation never blocks a sandbox of an unrelated pod, and a
// sandbox of a pod sharing the claim it is stuck on fails in time, never
// overrunning NRI's budget (the kubelet retries it).
func TestBusyReconciliationBlocksOnlyItsClaim(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p1", dev("blue", "")))
	h.put(t, claimRec("c2", "b", 0, "p2", dev("red", "")))
	shared := claimRec("c1", "a", 0, "p1", dev("blue", ""))
	shared.Pods = append(shared.Pods, checkpoint.Pod{UID: "p3", Namespace: "ns", Name: "pod-p3"})
	h.put(t, shared)
	h.cni.gate = map[string]chan struct{}{"blue": make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.plugin.Reconcile(ctx, []*api.PodSandbox{h.sandbox("sb1", "p1")}); close(done) }()
	h.cni.waitFor(t, "ADD blue sb1 net1")
	h.plugin.setBudget(func() time.Duration { return 400 * time.Millisecond })
	h.plugin.Margin = 100 * time.Millisecond
	if err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb2", "p2")); err != nil {
		t.Fatalf("a sandbox of an unrelated claim during a reconciliation: %v", err)
	}
	start := time.Now()
	err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb3", "p3"))
	if err == nil || !strings.Contains(err.Error(), "busy") || time.Since(start) > 400*time.Millisecond {
		t.Fatalf("a sandbox of the claim the reconciliation is stuck on: %v after %v", err, time.Since(start))
	}
	if calls := h.cni.Calls(); slices.Contains(calls, "ADD blue sb3 net1") {
		t.Fatalf("two ADDs on one claim at once: %v", calls)
	}
	cancel()
	<-done
	h.plugin.Wait()
}

// Sandboxes of different pods attach in parallel: while one pod's ADD is in
// progress, another pod's sandbox is attached and answered.
func TestSandboxesOfDifferentPodsAttachInParallel(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p1", dev("blue", "")))
	h.put(t, claimRec("c2", "b", 0, "p2", dev("red", "")))
	gate := make(chan struct{})
	h.cni.gate = map[string]chan struct{}{"blue": gate}
	first := make(chan error, 1)
	go func() { first <- h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb1", "p1")) }()
	h.cni.waitFor(t, "ADD blue sb1 net1")
	if err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb2", "p2")); err != nil {
		t.Fatalf("the second pod, while the first one's ADD runs: %v", err)
	}
	select {
	case err := <-first:
		t.Fatalf("the first pod finished before its ADD did: %v", err)
	default:
	}
	close(gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	h.plugin.Wait()
	if h.attachments("c1") != 1 || h.attachments("c2") != 1 {
		t.Fatalf("attachments: c1 %d, c2 %d", h.attachments("c1"), h.attachments("c2"))
	}
}

// Secure runs after each ADD, with the attachment as it will be recorded;
// its failure fails the sandbox closed: every attachment is taken back.
func TestSecureFailureFailsTheSandbox(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p", dev("blue", ""), dev("red", "")))
	var secured []string
	h.plugin.Secure = func(_ context.Context, _ *checkpoint.Claim, d *checkpoint.Device, _ checkpoint.Pod, at checkpoint.Attachment) error {
		secured = append(secured, d.Network.Name+" "+at.IfName+" "+at.NetNS)
		if at.IfName == "net2" {
			return errors.New("policy table refused")
		}
		return nil
	}
	err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb1", "p"))
	if err == nil || !strings.Contains(err.Error(), "policy table refused") {
		t.Fatalf("error = %v", err)
	}
	h.timing(t)
	h.plugin.Wait()
	if want := []string{"blue net1 " + h.netns, "red net2 " + h.netns}; !slices.Equal(secured, want) {
		t.Errorf("secured %v, want %v", secured, want)
	}
	rolledBack(t, h)
}
