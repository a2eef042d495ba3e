package ruleagent

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/plugins/kernel/netns"
	"github.com/netclass-dev/netclass/shim/sandboxes"
)

// primaryFixture adds the node's sandboxes (pods a and b of the fixture,
// and c, a pod without netclass attachments) and the primary network's
// host ends to the fixture.
type primaryFixture struct {
	*fixture
	sandboxes []sandboxes.Sandbox
	hostEnds  int      // HostEnd calls
	removed   []string // host ends whose rules were removed
}

func newPrimaryFixture() *primaryFixture {
	f := &primaryFixture{fixture: newFixture()}
	f.pods["c"] = map[string]string{"app": "web"}
	for _, pod := range []string{"a", "b", "c"} {
		f.sandboxes = append(f.sandboxes, sandboxes.Sandbox{Pod: types.NamespacedName{Namespace: "t1", Name: pod},
			UID: types.UID(pod), ID: "sb-" + pod, NetNS: "/ns/" + pod})
	}
	f.agent.Primary = NewPrimary(func() []sandboxes.Sandbox { return slices.Clone(f.sandboxes) },
		func(podNS, ifname string) (string, error) { f.hostEnds++; return "veth-" + podNS[len("/ns/"):], nil },
		func(hostIf string) error { f.removed = append(f.removed, hostIf); return nil })
	return f
}

// primaryQoS selects the pods labelled app=web on the default network (no
// networkSelectors, as the seed's examples).
func primaryQoS(dscp int32) *ncv1.NetworkQoS {
	return &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "primary"},
		Spec: ncv1.NetworkQoSSpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Egress: []ncv1.Rule{{DSCP: dscp}}}}
}

// primaryOutcomes returns the pods whose primary interface the sync
// reported, with the objects that select each.
func primaryOutcomes(outs []Outcome) map[string][]string {
	got := map[string][]string{}
	for _, o := range outs {
		if o.IfName == PrimaryIfName {
			got[o.Pod.Name] = o.Selected
		}
	}
	return got
}

// A NetworkQoS without networkSelectors marks the primary interface of the
// pods it selects (with or without netclass attachments) and never their
// attachments; the first sync after a start checks every pod once (rules
// of objects deleted meanwhile go), later ones touch only what changed.
func TestPrimaryFollowsSelection(t *testing.T) {
	f := newPrimaryFixture()
	f.policies["t1"] = []*ncv1.NetworkQoS{primaryQoS(20)}
	outs := f.agent.Sync(context.Background())
	if got := primaryOutcomes(outs); len(got["a"]) != 1 || len(got["c"]) != 1 || len(got["b"]) != 0 {
		t.Fatalf("first sync: primary outcomes %v, want a and c selected, b checked", got)
	}
	for _, ns := range []string{"/ns/a", "/ns/c"} {
		if got := rulesOf(t, f.kernel, ns+"/eth0"); !slices.Equal(got, []uint8{20}) {
			t.Errorf("%s eth0 holds %v, want [20]", ns, got)
		}
	}
	if p := f.kernel.plans["/ns/b/eth0"]; p == nil || p.NeedsRules() {
		t.Errorf("b's eth0 was not checked once with an empty plan: %+v", p)
	}
	if _, ok := f.kernel.plans["/ns/a/net1"]; !ok {
		t.Error("a's attachment lost its own plan")
	} else if got := rulesOf(t, f.kernel, "/ns/a/net1"); len(got) != 0 {
		t.Errorf("a default-network object reached the attachment net1: %v", got)
	}
	calls, hostEnds := f.kernel.calls, f.hostEnds
	if outs := f.agent.Sync(context.Background()); len(primaryOutcomes(outs)) != 2 || f.kernel.calls != calls || f.hostEnds != hostEnds {
		t.Errorf("a sync with nothing changed: %d primary outcomes, %d kernel calls, %d host end lookups; want 2, 0, 0",
			len(primaryOutcomes(outs)), f.kernel.calls-calls, f.hostEnds-hostEnds)
	}
	f.policies["t1"] = []*ncv1.NetworkQoS{primaryQoS(34)}
	f.agent.Sync(context.Background())
	if got := rulesOf(t, f.kernel, "/ns/a/eth0"); !slices.Equal(got, []uint8{34}) || f.kernel.calls != calls+2 {
		t.Errorf("after the edit a's eth0 holds %v after %d kernel calls, want [34] after 2", got, f.kernel.calls-calls)
	}
}

// A pod nothing selects costs no kernel access and no host end lookup,
// once the first sync is done, however often the agent syncs.
func TestPrimaryUnselectedPodsCostNothing(t *testing.T) {
	f := newPrimaryFixture()
	f.agent.Sync(context.Background())
	calls := f.kernel.calls
	f.pods["d"] = map[string]string{"app": "other"}
	f.sandboxes = append(f.sandboxes, sandboxes.Sandbox{Pod: types.NamespacedName{Namespace: "t1", Name: "d"}, UID: "d", ID: "sb-d", NetNS: "/ns/d"})
	f.policies["t1"] = []*ncv1.NetworkQoS{primaryQoS(20)}
	f.pods["a"], f.pods["c"] = map[string]string{"app": "db"}, map[string]string{"app": "db"}
	for range 3 {
		if outs := f.agent.Sync(context.Background()); len(primaryOutcomes(outs)) != 0 {
			t.Fatalf("primary outcomes %v for pods nothing selects", primaryOutcomes(outs))
		}
	}
	if f.kernel.calls != calls || f.hostEnds != 0 {
		t.Errorf("%d kernel calls and %d host end lookups for pods nothing selects, want none", f.kernel.calls-calls, f.hostEnds)
	}
}

// A relabelled pod leaves (its rules go) and comes back; a PodNetworks
// selection alone never reaches the primary interface; a gone pod's rules
// are removed from its host end, by name.
func TestPrimaryRelabelAndPodGone(t *testing.T) {
	f := newPrimaryFixture()
	f.policies["t1"] = []*ncv1.NetworkQoS{primaryQoS(20)}
	f.agent.Sync(context.Background())
	f.pods["a"] = map[string]string{"app": "db"}
	f.agent.Sync(context.Background())
	if p := f.kernel.plans["/ns/a/eth0"]; p == nil || p.NeedsRules() {
		t.Errorf("relabelled out, a's eth0 holds %+v, want no rules", p)
	}
	f.pods["a"] = map[string]string{"app": "web"}
	f.agent.Sync(context.Background())
	if got := rulesOf(t, f.kernel, "/ns/a/eth0"); !slices.Equal(got, []uint8{20}) {
		t.Errorf("relabelled back, a's eth0 holds %v, want [20]", got)
	}
	f.sandboxes = slices.DeleteFunc(f.sandboxes, func(s sandboxes.Sandbox) bool { return s.UID == "c" })
	f.agent.Sync(context.Background())
	if !slices.Equal(f.removed, []string{"veth-c"}) {
		t.Errorf("rules removed from %v when c went, want [veth-c]", f.removed)
	}
	other := primaryQoS(40)
	other.Name, other.Spec.NetworkSelectors = "attachments", ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.PodNetworks, PodNetworkSelector: &metav1.LabelSelector{}}}
	f.policies["t1"] = []*ncv1.NetworkQoS{other}
	f.agent.Sync(context.Background())
	if p := f.kernel.plans["/ns/a/eth0"]; p == nil || p.NeedsRules() {
		t.Errorf("a PodNetworks selection reached a's eth0: %+v", p)
	}
	if got := rulesOf(t, f.kernel, "/ns/a/net1"); !slices.Contains(got, 40) {
		t.Errorf("the PodNetworks selection did not reach a's net1: %v", got)
	}
}

// The RunPodSandbox guard applies a selected pod's rules before the agent's
// next sync, which then has nothing to do; an unselected pod costs the
// guard nothing.
func TestGuardPrimary(t *testing.T) {
	f := newPrimaryFixture()
	f.agent.Sync(context.Background())
	f.policies["t1"] = []*ncv1.NetworkQoS{primaryQoS(20)}
	calls := f.kernel.calls
	e := sandboxes.Sandbox{Pod: types.NamespacedName{Namespace: "t1", Name: "e"}, UID: "e", ID: "sb-e", NetNS: "/ns/e"}
	pod, _ := fakePods{"e": {"app": "db"}}.Pod("t1", "e", "e")
	if err := f.agent.GuardPrimary(context.Background(), e, pod); err != nil || f.kernel.calls != calls {
		t.Fatalf("unselected pod: %v, %d kernel calls", err, f.kernel.calls-calls)
	}
	pod.Labels = map[string]string{"app": "web"}
	if err := f.agent.GuardPrimary(context.Background(), e, pod); err != nil {
		t.Fatal(err)
	}
	if got := rulesOf(t, f.kernel, "/ns/e/eth0"); !slices.Equal(got, []uint8{20}) {
		t.Fatalf("after the guard e's eth0 holds %v, want [20]", got)
	}
	f.pods["e"] = pod.Labels
	f.sandboxes = append(f.sandboxes, e)
	calls = f.kernel.calls
	f.agent.Sync(context.Background())
	if f.kernel.calls != calls+2 { // a and c: e is already right
		t.Errorf("the sync after the guard made %d kernel calls, want 2 (a, c)", f.kernel.calls-calls)
	}
}

// The sync that checks every pod once waits for the runtime's whole list
// (NRI Synchronize): one before it does not count. A stopped sandbox the
// runtime still lists (its namespace gone) is neither an error nor kept.
func TestPrimaryWaitsForTheRuntimesList(t *testing.T) {
	f := newPrimaryFixture()
	ready, all := false, f.sandboxes
	f.sandboxes = nil
	gcs := 0
	f.agent.Primary.Ready = func() bool { return ready }
	f.agent.Primary.GC = func() ([]string, error) { gcs++; return nil, nil }
	f.agent.Sync(context.Background())
	if gcs != 0 {
		t.Errorf("host ends collected %d times before the runtime's list", gcs)
	}
	f.sandboxes, ready = all, true
	stale := sandboxes.Sandbox{Pod: types.NamespacedName{Namespace: "t1", Name: "a"}, UID: "a", ID: "sb-old", NetNS: "/ns/gone"}
	f.sandboxes = append(f.sandboxes, stale)
	f.kernel.failNS = map[string]error{"/ns/gone": fmt.Errorf("interface eth0: %w", netns.ErrNotFound)}
	f.agent.Sync(context.Background())
	for _, ns := range []string{"/ns/a", "/ns/b", "/ns/c"} {
		if p, ok := f.kernel.plans[ns+"/eth0"]; !ok || p.NeedsRules() {
			t.Errorf("%s's eth0 was not checked once the runtime's list came: %+v", ns, p)
		}
	}
	f.policies["t1"] = []*ncv1.NetworkQoS{primaryQoS(20)}
	outs := f.agent.Sync(context.Background())
	if err := Errors(outs); err != nil {
		t.Errorf("a stopped sandbox still listed made an error: %v", err)
	}
	if got := rulesOf(t, f.kernel, "/ns/a/eth0"); !slices.Equal(got, []uint8{20}) {
		t.Errorf("a's running sandbox holds %v, want [20]", got)
	}
	if gcs != 1 {
		t.Errorf("host ends collected %d times, want once (with the first sync that checks every pod)", gcs)
	}
}

// A new sandbox's guard does not wait for a sync's kernel work (a burst of
// pod starts keeps the agent syncing): it applies its pod's rules while the
// sync is still in the kernel, and the sync, once done, keeps them.
func TestGuardPrimaryDoesNotWaitForASync(t *testing.T) {
	f := newPrimaryFixture()
	f.policies["t1"] = []*ncv1.NetworkQoS{primaryQoS(20)}
	entered, release := make(chan struct{}), make(chan struct{})
	kernel := f.kernel.sync
	var once sync.Once
	f.agent.kernel = func(items []Item) []Result {
		if items[0].PodNS != "/ns/e" {
			once.Do(func() { close(entered); <-release })
		}
		return kernel(items)
	}
	done := make(chan []Outcome)
	go func() { done <- f.agent.Sync(context.Background()) }()
	<-entered
	e := sandboxes.Sandbox{Pod: types.NamespacedName{Namespace: "t1", Name: "e"}, UID: "e", ID: "sb-e", NetNS: "/ns/e"}
	f.pods["e"] = map[string]string{"app": "web"}
	f.sandboxes = append(f.sandboxes, e)
	pod, _ := f.pods.Pod("t1", "e", "e")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := f.agent.GuardPrimary(ctx, e, pod)
	close(release)
	<-done
	if err != nil {
		t.Fatalf("the guard during a sync: %v", err)
	}
	if got := rulesOf(t, f.kernel, "/ns/e/eth0"); !slices.Equal(got, []uint8{20}) {
		t.Fatalf("e's eth0 holds %v, want [20]", got)
	}
	calls := f.kernel.calls
	f.agent.Sync(context.Background())
	if f.kernel.calls != calls {
		t.Errorf("the next sync made %d kernel calls: e's rules were lost or not recorded", f.kernel.calls-calls)
	}
}

// The audit checks the primary interfaces holding rules as the host-end
// ingress items their syncs are; one that differs is synced again at the
// next sync (alone), its host end still known when its pod goes.
func TestAuditChecksPrimaryInterfaces(t *testing.T) {
	f := newPrimaryFixture()
	f.policies["t1"] = []*ncv1.NetworkQoS{primaryQoS(20)}
	d := &drifts{drifted: map[string]bool{"/ns/c": true}}
	var items []Item
	f.agent.CheckQoS = func(it Item) error {
		items = append(items, it)
		if it.IfName == PrimaryIfName && !it.HostIngress {
			return fmt.Errorf("primary %s checked as an attachment", it.PodNS)
		}
		return d.check(it.PodNS, "net1", it.Plan.NeedsRules())
	}
	ctx := context.Background()
	f.agent.Sync(ctx)
	last, n := f.agent.auditNext(ctx, "")
	for range n - 1 {
		last, _ = f.agent.auditNext(ctx, last)
	}
	var primaries []string
	for _, it := range items {
		if it.IfName == PrimaryIfName {
			primaries = append(primaries, it.PodNS)
		}
	}
	if n != 4 || !slices.Equal(primaries, []string{"/ns/a", "/ns/c"}) {
		t.Fatalf("%d recorded, primary interfaces checked %v, want 4 (a, b's attachments; a, c's eth0) and [/ns/a /ns/c]", n, primaries)
	}
	calls := f.kernel.calls
	f.agent.Sync(ctx)
	if f.kernel.calls != calls+1 || f.kernel.plans["/ns/c/eth0"] == nil {
		t.Fatalf("the sync after the audit synced %d interfaces, want c's eth0 alone", f.kernel.calls-calls)
	}
	f.sandboxes = f.sandboxes[:2] // c goes
	f.agent.Sync(ctx)
	if !slices.Contains(f.removed, "veth-c") {
		t.Errorf("c's host end rules were not removed when it went: removed %v", f.removed)
	}
}
