package ruleagent

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/netpol"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/render"
)

var blue = attachment.NetworkRef{Class: "c", Group: "multinetwork.k8s.io", Version: "v1", Kind: "PodNetwork", Name: "blue"}

type fakeClaims struct {
	claims []*checkpoint.Claim
	locked [][]types.UID // the claims of each Locked call
	// meanwhile, when set, runs once the locks are "taken": what other
	// workers did between the agent's snapshot and its locks.
	meanwhile func()
}

func (f *fakeClaims) Claims() []*checkpoint.Claim { return f.claims }
func (f *fakeClaims) Locked(_ context.Context, uids []types.UID, fn func(map[types.UID]*checkpoint.Claim) error) error {
	f.locked = append(f.locked, uids)
	if f.meanwhile != nil {
		f.meanwhile()
	}
	now := map[types.UID]*checkpoint.Claim{}
	for _, c := range f.claims {
		if slices.Contains(uids, c.UID) {
			now[c.UID] = c
		}
	}
	return fn(now)
}

type fakeNetworks map[string]network.Network

func (f fakeNetworks) Lookup(device string) (network.Offer, bool) {
	n, ok := f[device]
	return network.Offer{Network: n}, ok
}

type fakePolicies map[string][]*ncv1.NetworkQoS

func (f fakePolicies) NetworkQoS(ns string) ([]*ncv1.NetworkQoS, error) { return f[ns], nil }

type fakePods map[types.UID]map[string]string

func (f fakePods) Pod(ns, name string, uid types.UID) (*corev1.Pod, bool) {
	l, ok := f[uid]
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Labels: l}}, ok
}

type fakePeers []netip.Addr

func (f *fakePeers) Addresses(string, ncv1.Destination, network.Network) ([]netip.Addr, error) {
	return *f, nil
}

// fakeKernel records the plan each interface was synced to.
type fakeKernel struct {
	calls int                  // interfaces synced
	plans map[string]*qos.Plan // netns/ifname -> plan
	fail  error
	// failNS fails the interfaces of a namespace.
	failNS map[string]error
}

func (k *fakeKernel) sync(items []Item) []Result {
	out := make([]Result, len(items))
	for i, it := range items {
		k.calls++
		if k.fail != nil {
			out[i].Err = k.fail
			continue
		}
		if err := k.failNS[it.PodNS]; err != nil {
			out[i].Err = err
			continue
		}
		if k.plans == nil {
			k.plans = map[string]*qos.Plan{}
		}
		k.plans[it.PodNS+"/"+it.IfName] = it.Plan
		if it.HostIngress != (it.IfName == PrimaryIfName) {
			out[i].Err = errors.New("HostIngress is for the primary interface only")
		}
		out[i].Changed = true
	}
	return out
}

// fixture: one claim shared by pods a (app=web) and b (app=db), each
// attached as net1 in its own namespace; nothing in the result has an
// address (a network without IPAM).
type fixture struct {
	claims   *fakeClaims
	networks fakeNetworks
	policies fakePolicies
	pods     fakePods
	peers    *fakePeers
	kernel   *fakeKernel
	agent    *Agent
}

func newFixture() *fixture {
	attached := func(pod, netns string) checkpoint.Attachment {
		return checkpoint.Attachment{PodUID: types.UID(pod), SandboxID: "sb-" + pod, NetNS: netns, IfName: "net1",
			State: checkpoint.Attached, Result: &checkpoint.Result{InterfaceName: "net1"}}
	}
	claim := &checkpoint.Claim{UID: "claim", Namespace: "t1", Name: "shared",
		Pods: []checkpoint.Pod{{UID: "a", Namespace: "t1", Name: "a"}, {UID: "b", Namespace: "t1", Name: "b"}},
		Devices: []checkpoint.Device{{Device: "blue", Pool: "n1", Network: blue,
			QoS:         &checkpoint.DeviceQoS{Base: &qos.Spec{DSCP: ptr.To(8)}},
			Attachments: []checkpoint.Attachment{attached("a", "/ns/a"), attached("b", "/ns/b")}}},
	}
	f := &fixture{
		claims:   &fakeClaims{claims: []*checkpoint.Claim{claim}},
		networks: fakeNetworks{"blue": {Ref: blue}},
		policies: fakePolicies{},
		pods:     fakePods{"a": {"app": "web"}, "b": {"app": "db"}},
		peers:    &fakePeers{},
		kernel:   &fakeKernel{},
	}
	f.agent = New(f.claims, f.networks, f.policies, f.pods, f.peers, f.kernel.sync)
	return f
}

func webQoS(dscp int32, to ...ncv1.Destination) *ncv1.NetworkQoS {
	rule := ncv1.Rule{DSCP: dscp}
	if len(to) > 0 {
		rule.Classifier = &ncv1.Classifier{To: to}
	}
	return &ncv1.NetworkQoS{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "web"},
		Spec: ncv1.NetworkQoSSpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			NetworkSelectors: ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.PodNetworks, PodNetworkSelector: &metav1.LabelSelector{}},
				{NetworkSelectionType: ncv1.Networks, NetworkSelector: &metav1.LabelSelector{}}},
			Egress: []ncv1.Rule{rule}}}
}

// rulesOf returns the DSCP of each rule of the plan an interface holds.
func rulesOf(t *testing.T, k *fakeKernel, key string) []uint8 {
	t.Helper()
	p, ok := k.plans[key]
	if !ok {
		t.Fatalf("%s was never synced", key)
	}
	var out []uint8
	for _, r := range p.Rules {
		out = append(out, *r.DSCP)
	}
	return out
}

func TestEachPodOfASharedClaimGetsItsOwnRules(t *testing.T) {
	f := newFixture()
	f.policies["t1"] = []*ncv1.NetworkQoS{webQoS(46)}
	outs := f.agent.Sync(context.Background())
	if err := Errors(outs); err != nil {
		t.Fatal(err)
	}
	if got := rulesOf(t, f.kernel, "/ns/a/net1"); len(got) != 1 || got[0] != 46 {
		t.Errorf("pod a (app=web) holds rules %v, want [46]", got)
	}
	if got := rulesOf(t, f.kernel, "/ns/b/net1"); len(got) != 0 {
		t.Errorf("pod b (app=db) holds rules %v, want none", got)
	}
	if d := f.kernel.plans["/ns/b/net1"].DSCP; d == nil || *d != 8 {
		t.Errorf("pod b lost the network's own DSCP: %v", d)
	}
	if len(outs) != 2 || len(outs[0].Selected) != 1 || len(outs[1].Selected) != 0 {
		t.Errorf("outcomes %+v: want pod a selected by web, pod b by nothing", outs)
	}
}

func TestSyncFollowsChangesAndSkipsWhatHolds(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	f.agent.Sync(ctx)
	if f.kernel.calls != 2 {
		t.Fatalf("first sync: %d kernel syncs, want 2 (one per attachment)", f.kernel.calls)
	}
	f.agent.Sync(ctx)
	if f.kernel.calls != 2 {
		t.Fatalf("a sync with nothing changed reached the kernel (%d calls)", f.kernel.calls)
	}
	steps := []struct {
		name   string
		change func()
		want   []uint8 // pod a's rules
	}{
		{"NetworkQoS created", func() { f.policies["t1"] = []*ncv1.NetworkQoS{webQoS(46)} }, []uint8{46}},
		{"its DSCP edited", func() { f.policies["t1"] = []*ncv1.NetworkQoS{webQoS(10)} }, []uint8{10}},
		{"pod a relabelled out", func() { f.pods["a"] = map[string]string{"app": "other"} }, nil},
		{"pod a relabelled in", func() { f.pods["a"] = map[string]string{"app": "web"} }, []uint8{10}},
		{"NetworkQoS deleted", func() { f.policies["t1"] = nil }, nil},
	}
	for _, s := range steps {
		before := f.kernel.calls
		s.change()
		if err := Errors(f.agent.Sync(ctx)); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if f.kernel.calls != before+1 {
			t.Errorf("%s: %d kernel syncs, want 1 (pod a's only)", s.name, f.kernel.calls-before)
		}
		if got := rulesOf(t, f.kernel, "/ns/a/net1"); !slices.Equal(got, s.want) {
			t.Errorf("%s: pod a holds rules %v, want %v", s.name, got, s.want)
		}
	}
}

func TestPeersFollowTheSelectedPods(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	f.policies["t1"] = []*ncv1.NetworkQoS{webQoS(46, ncv1.Destination{PodSelector: &metav1.LabelSelector{}})}
	f.agent.Sync(ctx)
	if got := rulesOf(t, f.kernel, "/ns/a/net1"); len(got) != 0 {
		t.Fatalf("a rule whose peers have no address applies: %v", got)
	}
	*f.peers = []netip.Addr{netip.MustParseAddr("10.0.0.7")}
	f.agent.Sync(ctx)
	p := f.kernel.plans["/ns/a/net1"]
	if len(p.Rules) != 1 || len(p.Rules[0].V4) != 1 || p.Rules[0].V4[0].From != netip.MustParseAddr("10.0.0.7") {
		t.Fatalf("the new peer's address is not matched: %+v", p.Rules)
	}
	*f.peers = nil
	f.agent.Sync(ctx)
	if got := rulesOf(t, f.kernel, "/ns/a/net1"); len(got) != 0 {
		t.Errorf("the rule of a peer that went still applies: %v", got)
	}
}

// A destination the rules of many attachments name is resolved once per
// sync, not once per attachment; the next sync resolves it again (what a
// sync remembers never goes stale).
func TestASyncResolvesEachDestinationOnce(t *testing.T) {
	f := newFixture()
	f.pods["b"] = map[string]string{"app": "web"} // both pods selected
	*f.peers = []netip.Addr{netip.MustParseAddr("10.0.0.7")}
	counted := &countingPeers{inner: f.peers}
	f.agent = New(f.claims, f.networks, f.policies, f.pods, counted, f.kernel.sync)
	f.policies["t1"] = []*ncv1.NetworkQoS{webQoS(46, ncv1.Destination{PodSelector: &metav1.LabelSelector{}})}
	for sync := 1; sync <= 2; sync++ {
		if err := Errors(f.agent.Sync(context.Background())); err != nil {
			t.Fatal(err)
		}
		if counted.n != sync {
			t.Fatalf("after sync %d of two attachments naming one destination: %d resolutions, want %d", sync, counted.n, sync)
		}
	}
	for _, key := range []string{"/ns/a/net1", "/ns/b/net1"} {
		if p := f.kernel.plans[key]; len(p.Rules) != 1 || len(p.Rules[0].V4) != 1 {
			t.Errorf("%s holds %+v, want the rule to 10.0.0.7", key, p.Rules)
		}
	}
}

// countingPeers counts the resolutions that reach inner.
type countingPeers struct {
	inner render.Peers
	n     int
}

func (c *countingPeers) Addresses(ns string, to ncv1.Destination, net network.Network) ([]netip.Addr, error) {
	c.n++
	return c.inner.Addresses(ns, to, net)
}

func TestFailedSyncIsRetriedAndReported(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	f.kernel.fail = errors.New("netns vanished")
	outs := f.agent.Sync(ctx)
	if err := Errors(outs); err == nil || !strings.Contains(err.Error(), "pod t1/a interface net1: netns vanished") {
		t.Fatalf("error %v, want one naming the pod, the interface and the cause", err)
	}
	f.kernel.fail = nil
	before := f.kernel.calls
	if err := Errors(f.agent.Sync(ctx)); err != nil {
		t.Fatal(err)
	}
	if f.kernel.calls != before+2 {
		t.Errorf("the failed attachments were not synced again (%d calls)", f.kernel.calls-before)
	}
}

func TestLeavesAloneWhatItDoesNotOwn(t *testing.T) {
	f := newFixture()
	c := f.claims.claims[0]
	c.Devices[0].Attachments[1].State = checkpoint.Adding // ADD in progress
	f.agent.Sync(context.Background())
	if _, ok := f.kernel.plans["/ns/b/net1"]; ok {
		t.Error("an attachment being added was synced")
	}
	c.Devices[0].QoS = nil // recorded before the agent
	f.kernel.plans = nil
	f.agent.Sync(context.Background())
	if len(f.kernel.plans) != 0 {
		t.Errorf("a device without a recorded qos was synced: %v", f.kernel.plans)
	}
}

func TestInvalidResultIsAnErrorAndChangesNothing(t *testing.T) {
	f := newFixture()
	var objs []*ncv1.NetworkQoS
	for i := range qos.MaxRules + 1 { // more rules than an attachment may hold
		o := webQoS(10)
		o.Name = "web" + strings.Repeat("x", i)
		objs = append(objs, o)
	}
	f.policies["t1"] = objs
	outs := f.agent.Sync(context.Background())
	if err := Errors(outs); err == nil || !strings.Contains(err.Error(), "qos.egress") {
		t.Fatalf("error %v, want one naming qos.egress", err)
	}
	if _, ok := f.kernel.plans["/ns/a/net1"]; ok {
		t.Error("an invalid plan reached the kernel")
	}
}

// Only the claims whose attachments need a change are locked, and an
// attachment removed between the agent's snapshot and its locks (a DEL
// that ran meanwhile) is not given rules that would outlive it.
func TestLocksOnlyWhatChangesAndSkipsWhatWent(t *testing.T) {
	f := newFixture()
	ctx := context.Background()
	other := &checkpoint.Claim{UID: "other", Namespace: "t1", Name: "other",
		Pods: []checkpoint.Pod{{UID: "c", Namespace: "t1", Name: "c"}},
		Devices: []checkpoint.Device{{Device: "blue", Pool: "n1", Network: blue, QoS: &checkpoint.DeviceQoS{},
			Attachments: []checkpoint.Attachment{{PodUID: "c", SandboxID: "sb-c", NetNS: "/ns/c", IfName: "net1", State: checkpoint.Attached}}}}}
	f.claims.claims = append(f.claims.claims, other)
	f.pods["c"] = map[string]string{"app": "db"}
	f.agent.Sync(ctx)
	f.claims.locked = nil
	f.policies["t1"] = []*ncv1.NetworkQoS{webQoS(46)} // selects pod a only
	f.agent.Sync(ctx)
	if len(f.claims.locked) != 1 || !slices.Equal(f.claims.locked[0], []types.UID{"claim"}) {
		t.Errorf("locked %v, want only the claim of pod a", f.claims.locked)
	}
	f.policies["t1"] = []*ncv1.NetworkQoS{webQoS(10)}
	shared := f.claims.claims[0]
	f.claims.meanwhile = func() { shared.Devices[0].Attachments = shared.Devices[0].Attachments[1:] } // pod a's DEL
	before := f.kernel.calls
	f.agent.Sync(ctx)
	if f.kernel.calls != before {
		t.Errorf("an attachment deleted meanwhile was synced (%d calls)", f.kernel.calls-before)
	}
}

// fakePolicyKernel records the policy plan each interface was synced to.
type fakePolicyKernel map[string]*netpol.Plan

func (k fakePolicyKernel) sync(items []podpolicy.Interface) []podpolicy.Result {
	out := make([]podpolicy.Result, len(items))
	for i, it := range items {
		k[it.PodNS+"/"+it.IfName] = it.Plan
		out[i].Changed = true
	}
	return out
}

// The NetworkPolicies labelled for netclass select pods by their own labels
// and isolate their attachments; an unlabelled one is ignored; a policy
// whose label goes away stops isolating the pod.
func TestNetworkPoliciesAreEnforcedPerPod(t *testing.T) {
	f := newFixture()
	k := fakePolicyKernel{}
	var pols []*networkingv1.NetworkPolicy
	f.agent.NetPol = &NetPolicies{List: func(string) ([]*networkingv1.NetworkPolicy, error) { return pols, nil }, Kernel: k.sync}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "deny",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	unlabelled := deny.DeepCopy()
	unlabelled.Name, unlabelled.Labels, unlabelled.Spec.PodSelector = "open", nil, metav1.LabelSelector{}
	pols = []*networkingv1.NetworkPolicy{deny, unlabelled}
	ctx := context.Background()
	outs := f.agent.Sync(ctx)
	if p := k["/ns/a/net1"]; p == nil || !p.Ingress.Isolated || p.Egress.Isolated {
		t.Errorf("pod a (app=web): policy %+v, want ingress isolated", p)
	}
	if p := k["/ns/b/net1"]; p == nil || !p.IsZero() {
		t.Errorf("pod b: policy %+v, want open (the unlabelled policy selecting it is ignored)", p)
	}
	if len(outs[0].Policies) != 1 || outs[0].Policies[0] != "deny" || len(outs[1].Policies) != 0 {
		t.Errorf("outcomes name the policies %v and %v, want [deny] and none", outs[0].Policies, outs[1].Policies)
	}
	delete(k, "/ns/a/net1")
	f.agent.Sync(ctx)
	if _, ok := k["/ns/a/net1"]; ok {
		t.Error("an unchanged policy was synced again")
	}
	deny.Labels = nil // moved out of enforcement
	f.agent.Sync(ctx)
	if p := k["/ns/a/net1"]; p == nil || !p.IsZero() {
		t.Errorf("pod a after the label went: %+v, want open", p)
	}
}

// A network withdrawn from the node (disabled, deleted) leaves its pods
// running: their policies stay current, revocations included.
func TestPoliciesOfAWithdrawnNetworkStayCurrent(t *testing.T) {
	f := newFixture()
	k := fakePolicyKernel{}
	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "t1", Name: "deny",
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	pols := []*networkingv1.NetworkPolicy{deny}
	f.agent.NetPol = &NetPolicies{List: func(string) ([]*networkingv1.NetworkPolicy, error) { return pols, nil }, Kernel: k.sync}
	ctx := context.Background()
	f.agent.Sync(ctx)
	delete(f.networks, "blue")
	deny.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{}} // now allows everything in
	f.agent.Sync(ctx)
	if p := k["/ns/a/net1"]; p == nil || !p.Ingress.Isolated || len(p.Ingress.Allow) != 1 {
		t.Errorf("pod a of the withdrawn network: policy %+v, want the edited one", p)
	}
	pols = nil
	f.agent.Sync(ctx)
	if p := k["/ns/a/net1"]; p == nil || !p.IsZero() {
		t.Errorf("pod a of the withdrawn network after its policy went: %+v, want none", p)
	}
}

// Every sync ends with Tidy, after its kernel syncs (what they opened is
// tidied by that sync or a later one), even a sync that changes nothing; a
// failing Tidy leaves the outcomes alone.
func TestEachSyncEndsWithTidy(t *testing.T) {
	f := newFixture()
	k := fakePolicyKernel{}
	var calls []string
	tidyErr := errors.New("tidy failed")
	f.agent.NetPol = &NetPolicies{List: func(string) ([]*networkingv1.NetworkPolicy, error) { return nil, nil },
		Kernel: func(items []podpolicy.Interface) []podpolicy.Result {
			calls = append(calls, "sync")
			return k.sync(items)
		},
		Tidy: func() error { calls = append(calls, "tidy"); return tidyErr }}
	ctx := context.Background()
	for _, o := range f.agent.Sync(ctx) {
		if o.Err != nil {
			t.Errorf("%s/%s: %v (a failing Tidy is not the attachment's)", o.Pod, o.IfName, o.Err)
		}
	}
	f.agent.Sync(ctx)
	if want := []string{"sync", "tidy", "tidy"}; !slices.Equal(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
}
