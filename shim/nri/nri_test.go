package nri

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/cni"
)

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
	// Multus made net2 and net4 in the pod first (and eth0): the automatic
	// names skip them
	steps, err = PlanAround(claims, "p", map[string]bool{"eth0": true, "net2": true, "net4": true})
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, s := range steps {
		got = append(got, s.Device().Network.Name+"="+s.IfName)
	}
	if strings.Join(got, ",") != "blue=net3,data=data0,green=net5,red=net1" {
		t.Fatalf("plan around net2, net4: %v", got)
	}
	// a configured name another caller took is refused (its failed ADD's
	// rollback would remove that interface)
	if _, err := PlanAround(claims, "p", map[string]bool{"net1": true}); err == nil || !strings.Contains(err.Error(), "interface name net1 of claim") {
		t.Fatalf("a configured name taken: %v", err)
	}
	claims[0].Devices[0].InterfaceName = "data0"
	if _, err := Plan(claims, "p"); err == nil || !strings.Contains(err.Error(), "configured twice") {
		t.Fatalf("duplicate names: %v", err)
	}
}

func TestRunAndStop(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p", dev("blue", "")))
	h.put(t, claimRec("c2", "b", 1, "p", dev("red", "")))
	if err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb1", "p")); err != nil {
		t.Fatal(err)
	}
	tm := h.timing(t)
	if tm.Attachments != 2 || tm.Err != nil || tm.CNI <= 0 || tm.Add < tm.CNI || tm.Total < tm.Add || tm.Budget != 2*time.Second {
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

// TestStopRewritesASharedClaimsStatus: a sandbox leaving a claim other
// pods still use has the claim's status rewritten without it; a claim it
// was the only user of keeps its status (it goes with its pod).
func TestStopRewritesASharedClaimsStatus(t *testing.T) {
	h := newHarness(t)
	shared := claimRec("c1", "a", 0, "p1", dev("blue", ""))
	shared.Pods = append(shared.Pods, checkpoint.Pod{UID: "p2", Namespace: "ns", Name: "pod-p2"})
	h.put(t, shared)
	h.put(t, claimRec("c2", "b", 1, "p1", dev("red", "")))
	for _, sb := range []*api.PodSandbox{h.sandbox("sb1", "p1"), h.sandbox("sb2", "p2")} {
		if err := h.plugin.RunPodSandbox(context.Background(), sb); err != nil {
			t.Fatal(err)
		}
		h.timing(t)
	}
	h.plugin.Wait()
	if got := h.reporter.statuses["a"]; len(got) != 2 {
		t.Fatalf("shared claim's status %v, want both pods", got)
	}
	if err := h.plugin.StopPodSandbox(context.Background(), h.sandbox("sb1", "p1")); err != nil {
		t.Fatal(err)
	}
	h.plugin.Wait()
	if got := h.reporter.statuses["a"]; !slices.Equal(got, []string{"blue-dev net1"}) {
		t.Fatalf("shared claim's status after one pod stopped: %v, want the other pod's only", got)
	}
	if got := h.reporter.statuses["b"]; !slices.Equal(got, []string{"red-dev net2"}) {
		t.Fatalf("the stopped pod's own claim's status was rewritten: %v", got)
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

// A failed sandbox is rolled back after RunPodSandbox answered, in the
// background: holding its claims' locks, or the rule agent (which applies
// rules under them to the attachments a record says are attached) could
// write a rolled-back port's rules after its DEL removed them (the churn
// of test/scale found such rules left on a node), and after the sandbox's
// Secure work (a policy call given up on at the deadline) has ended,
// waited for before the locks are taken.
func TestRollbackHoldsTheClaims(t *testing.T) {
	h := newHarness(t)
	h.put(t, claimRec("c1", "a", 0, "p", dev("blue", ""), dev("red", "")))
	h.cni.failAdd = map[string]error{"net2": errors.New("no addresses left")}
	var settled []string
	returned := make(chan struct{}) // RunPodSandbox's own hold of c1 has ended
	h.plugin.SettleSecure = func(_ context.Context, sandbox string) error {
		<-returned
		h.plugin.locks.mu.Lock()
		defer h.plugin.locks.mu.Unlock()
		settled = append(settled, fmt.Sprintf("%s before %d DELs, claim held %v", sandbox, len(h.cni.Calls())-2, h.plugin.locks.held["c1"]))
		return nil
	}
	var unheld []string
	h.cni.onDel = func(call string) {
		h.plugin.locks.mu.Lock()
		defer h.plugin.locks.mu.Unlock()
		if !h.plugin.locks.held["c1"] {
			unheld = append(unheld, call)
		}
	}
	err := h.plugin.RunPodSandbox(context.Background(), h.sandbox("sb1", "p"))
	close(returned)
	if err == nil {
		t.Fatal("RunPodSandbox succeeded with a failing ADD")
	}
	h.timing(t)
	h.plugin.Wait()
	if len(unheld) > 0 {
		t.Fatalf("rolled back without claim c1's lock: %v", unheld)
	}
	if !slices.Equal(settled, []string{"sb1 before 0 DELs, claim held false"}) {
		t.Fatalf("the sandbox's Secure work settled: %v, want once, before the DELs and the claim's lock", settled)
	}
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

// The interfaces a sandbox's own attachments recorded are not others':
// an attachment made again (after a restart) keeps its name.
func TestOthersOf(t *testing.T) {
	c := claimRec("c1", "a", 0, "p", dev("blue", ""))
	c.Devices[0].Attachments = []checkpoint.Attachment{{SandboxID: "sb1", IfName: "net2"}, {SandboxID: "sb0", IfName: "net3"}}
	got := othersOf([]string{"lo", "eth0", "net1", "net2", "net3"}, "sb1", []*checkpoint.Claim{c})
	want := map[string]bool{"lo": true, "eth0": true, "net1": true, "net3": true}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("others %v, want %v", got, want)
	}
}
