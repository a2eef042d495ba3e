package bench

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/nftables"
	mnpv1beta1 "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/apis/k8s.cni.cncf.io/v1beta1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	cnpv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/shim/netpolicy"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/peers"
	"github.com/netclass-dev/netclass/shim/ruleagent"
	"github.com/netclass-dev/netclass/test/nstest"
)

// polPods pods (one attachment each) and polPolicies NetworkPolicies, all
// in polNamespace, make the node of the NetworkPolicy benchmark.
const (
	polPods      = 100
	polPolicies  = 50
	polNamespace = "bench"
)

var (
	polApps  = []string{"web", "db", "client"}
	polTiers = []string{"t0", "t1", "t2", "t3", "t4"}
)

// polSources is benchSources with pods of their own labels, pod peers
// resolved against those labels, and the namespace's NetworkPolicies.
type polSources struct {
	*benchSources
	labels []map[string]string // by pod index
	addrs  []netip.Addr        // by pod index: the pod's address on the network
	byUID  map[types.UID]int
	pols   []*networkingv1.NetworkPolicy
	// multi are pols as MultiNetworkPolicies (their benchmark's).
	multi []*mnpv1beta1.MultiNetworkPolicy
	// cluster are the ClusterNetworkPolicies (theirs).
	cluster []*cnpv1beta1.ClusterNetworkPolicy
}

func (s *polSources) Pod(ns, name string, uid types.UID) (*corev1.Pod, bool) {
	i, ok := s.byUID[uid]
	if !ok {
		return nil, false
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Labels: s.labels[i]}}, true
}

// Addresses resolves a peer the way the shim's informers do: the
// addresses, in pod order, of the pods its selectors match (the only
// namespace is polNamespace).
func (s *polSources) Addresses(ns string, to ncv1.Destination, _ network.Network) ([]netip.Addr, error) {
	if to.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(to.NamespaceSelector)
		if err != nil || !sel.Matches(labels.Set{"kubernetes.io/metadata.name": polNamespace}) {
			return nil, err
		}
	} else if ns != polNamespace {
		return nil, nil
	}
	pods := labels.Everything()
	if to.PodSelector != nil {
		var err error
		if pods, err = metav1.LabelSelectorAsSelector(to.PodSelector); err != nil {
			return nil, err
		}
	}
	var out []netip.Addr
	for i, l := range s.labels {
		if pods.Matches(labels.Set(l)) {
			out = append(out, s.addrs[i])
		}
	}
	return out, nil
}

// Endpoints is Addresses pod by pod (the pods name no ports).
func (s *polSources) Endpoints(ns string, to ncv1.Destination, net network.Network) ([]peers.Endpoint, error) {
	addrs, err := s.Addresses(ns, to, net)
	out := make([]peers.Endpoint, len(addrs))
	for i, a := range addrs {
		out[i] = peers.Endpoint{Addrs: []netip.Addr{a}}
	}
	return out, err
}

func (s *polSources) list(ns string) ([]*networkingv1.NetworkPolicy, error) {
	if ns != polNamespace {
		return nil, nil
	}
	return s.pols, nil
}

// BenchmarkNetworkPolicyEdit100Pods50Policies measures netclass-dra's agent
// enforcing NetworkPolicies on a node with 100 running attachments (net1
// of 100 pod namespaces) and 50 policies of their namespace, each pod
// selected by 14 to 16 of them (by app, tier or both; two select every
// pod): ingress from pod selectors, from ipBlocks with except (IPv4 and
// IPv6), TCP and UDP ports, port ranges, and egress for some. The devices
// have no QoS, so only policy work is done. Each iteration edits one
// policy (the port of its first rule, the policies taken in turn); the
// agent runs as in netclass-dra (Run: triggered as by an informer event,
// its syncs at least 250 ms apart, so each edit, made as the previous
// sync ends, waits the rest of them), then the sync that brings the pods the policy
// selects to it; the other pods' plans are unchanged and must cost no
// kernel access). It reports the p50/p99 time from the edit until every
// pod holds it (that wait included, the API server's and the
// informer's delivery not) and fails when the p99 misses effectTarget;
// also the syncs' own p50/p99 and CPU time, the attachments changed per
// edit, the rules and set elements of a pod's policy table, and the heap
// in use. The API side is faked; the kernel side is real, and checked
// against netpolicy.Compile at the end.
func BenchmarkNetworkPolicyEdit100Pods50Policies(b *testing.B) {
	benchPolicyEdit(b, labelledKind)
}

// BenchmarkNetworkPolicyRuleEdit100Pods50Policies is the same with an
// edit that changes a rule rather than a set's elements: the protocol of
// the policy's first port, TCP or UDP, in turn.
func BenchmarkNetworkPolicyRuleEdit100Pods50Policies(b *testing.B) {
	kind := labelledKind
	kind.edit = func(src *polSources, k int) { editProtocol(src.pols[k]) }
	benchPolicyEdit(b, kind)
}

// policyKind is the kind of policy a policy benchmark writes: how the
// agent is given the policies, how an edit reaches them, and which of an
// outcome's lists names them.
type policyKind struct {
	name  string
	setUp func(testing.TB, *ruleagent.NetPolicies, *polSources)
	edit  func(*polSources, int)
	named func(ruleagent.Outcome) []string
}

var labelledKind = policyKind{
	name:  "NetworkPolicy",
	setUp: func(_ testing.TB, np *ruleagent.NetPolicies, src *polSources) { np.List = src.list },
	edit:  func(src *polSources, k int) { editPort(src.pols[k]) },
	named: func(o ruleagent.Outcome) []string { return o.Policies },
}

// benchPolicyEdit is the body of the policy edit benchmarks.
func benchPolicyEdit(b *testing.B, kind policyKind) {
	host, src, pods := polNode(b)
	agent := ruleagent.New(src, src, src, src, src, noQoS)
	agent.NetPol = &ruleagent.NetPolicies{Kernel: inHost(host, podpolicy.Sync), Peers: src}
	kind.setUp(b, agent.NetPol, src)
	live, outs := runAgent(b, agent) // the tables the pods start with
	if err := firstSync(outs); err != nil {
		b.Fatal(err)
	}
	selects := selectedBy(outs, kind.named)
	logSpread(b, outs, kind.named)
	var times editTimes
	var slowest time.Duration
	changed, slowestPods := 0, 0
	b.ResetTimer()
	for i := range b.N {
		// Each policy is edited twice in a row, the second edit undoing the
		// first: at once as the last sync ends (a stream of edits), then
		// after a quiet spell. 7 is prime to 50: every kind of policy in turn.
		k := (i / 2 * 7) % polPolicies
		edit, record := live.edit, times.add
		if i%2 == 1 {
			edit, record = live.editQuiet, times.addQuiet
		}
		before := cpuTime(b)
		effect, s := edit(b, func() { kind.edit(src, k) })
		record(effect, s.took, cpuTime(b)-before)
		n, err := editSync(s.outs, src.pols[k].Name, selects)
		if err != nil {
			b.Fatal(err)
		}
		if changed += n; effect > slowest {
			slowest, slowestPods = effect, n
		}
	}
	b.StopTimer()
	b.Logf("slowest edit: %v, %d attachments changed", slowest, slowestPods)
	size := checkPolicies(b, host, src, pods)
	b.ReportMetric(float64(changed)/float64(b.N), "pods-changed/edit")
	b.ReportMetric(float64(size.rules)/polPods, "rules/attachment")
	b.ReportMetric(float64(size.sets)/polPods, "sets/attachment")
	b.ReportMetric(float64(size.elems)/polPods, "set-elems/attachment")
	b.ReportMetric(heapMiB(), "heap-MiB")
	times.report(b, fmt.Sprintf("a %s edit (%d pods, %d policies)", kind.name, polPods, polPolicies))
	runtime.KeepAlive(agent)
}

// inHost runs a policy kernel with the host namespace of the benchmark as
// the node's (where the bridged ports' policies live), as netclass-dra
// runs it in the node's.
func inHost(host *nstest.NS, kernel func([]podpolicy.Interface) []podpolicy.Result) func([]podpolicy.Interface) []podpolicy.Result {
	return func(items []podpolicy.Interface) []podpolicy.Result {
		var res []podpolicy.Result
		if err := host.Run(func() error { res = kernel(items); return nil }); err != nil {
			res = make([]podpolicy.Result, len(items))
			for i := range res {
				res[i].Err = err
			}
		}
		return res
	}
}

// polNode builds the pods' namespaces (net1 of each a veth whose host end
// is a bridge port, as in BenchmarkQoSEdit100Attachments), their claims
// with QoS-less devices, and the policies.
func polNode(b *testing.B) (*nstest.NS, *polSources, []*nstest.NS) {
	host := nstest.New(b)
	host.Bridge(b, "ncbench")
	src := &polSources{benchSources: &benchSources{}, byUID: map[types.UID]int{}}
	var pods []*nstest.NS
	for i := range polPods {
		pod, claim := benchPod(b, host, i, polNamespace, nil)
		src.claims = append(src.claims, claim)
		src.byUID[claim.Pods[0].UID] = i
		src.labels = append(src.labels, map[string]string{"app": polApps[i%3], "tier": polTiers[i%5]})
		src.addrs = append(src.addrs, benchAddr(i))
		pods = append(pods, pod)
	}
	for k := range polPolicies {
		src.pols = append(src.pols, benchPolicy(k))
	}
	return host, src, pods
}

// noQoS is the agent's QoS kernel: no device has QoS, so it is never called.
func noQoS(items []ruleagent.Item) []ruleagent.Result {
	out := make([]ruleagent.Result, len(items))
	for i := range out {
		out[i].Err = errors.New("QoS synced on a device without QoS")
	}
	return out
}

// firstSync checks that the first sync installed every attachment's table
// with every rule.
func firstSync(outs []ruleagent.Outcome) error {
	if len(outs) != polPods {
		return fmt.Errorf("%d attachments synced, want %d", len(outs), polPods)
	}
	if err := ruleagent.Errors(outs); err != nil {
		return err
	}
	for _, o := range outs {
		if !o.PolicyChanged || o.PolicyIgnored != nil {
			return fmt.Errorf("attachment of %s: policy changed %v, rules left out: %v", o.Pod, o.PolicyChanged, o.PolicyIgnored)
		}
	}
	return nil
}

// selectedBy maps each policy to the pods it selects, as the agent saw it
// (named: the outcome's list of the benchmark's kind).
func selectedBy(outs []ruleagent.Outcome, named func(ruleagent.Outcome) []string) map[string][]types.NamespacedName {
	m := map[string][]types.NamespacedName{}
	for _, o := range outs {
		for _, p := range named(o) {
			m[p] = append(m[p], o.Pod)
		}
	}
	return m
}

// logSpread logs how many policies select a pod, at least and at most.
func logSpread(b *testing.B, outs []ruleagent.Outcome, named func(ruleagent.Outcome) []string) {
	least, most := polPolicies, 0
	for _, o := range outs {
		least, most = min(least, len(named(o))), max(most, len(named(o)))
	}
	b.Logf("each pod selected by %d to %d of the %d policies", least, most, polPolicies)
}

// editSync checks that the sync after an edit of policy updated exactly
// the pods it selects, and returns how many.
func editSync(outs []ruleagent.Outcome, policy string, selects map[string][]types.NamespacedName) (int, error) {
	if err := ruleagent.Errors(outs); err != nil {
		return 0, err
	}
	n := 0
	for _, o := range outs {
		if want := slices.Contains(selects[policy], o.Pod); o.PolicyChanged != want {
			return 0, fmt.Errorf("edit of %s: attachment of %s: policy changed %v, want %v", policy, o.Pod, o.PolicyChanged, want)
		}
		if o.PolicyChanged {
			n++
		}
	}
	return n, nil
}

// checkPolicies verifies every pod's policy, on the host side of its
// port, against the plan netpolicy.CompileAll gives for the labelled
// policies as last edited (the MultiNetworkPolicy benchmark's are the same
// policies) and the ClusterNetworkPolicies, and returns the rules and set elements (interval ends included)
// the ports hold in the host's tables.
func checkPolicies(b *testing.B, host *nstest.NS, src *polSources, pods []*nstest.NS) policySize {
	offer, _ := src.Lookup("bench")
	for i, pod := range pods {
		t := netpolicy.Target{Namespace: polNamespace, Labels: src.labels[i], NamespaceLabels: benchNamespaceLabels, Network: offer.Network}
		plan, _, err := netpolicy.CompileAll(netpolicy.Policies{NetworkPolicies: src.pols, Cluster: src.cluster}, t, src)
		if err != nil {
			b.Fatalf("compile the policy of pod %d: %v", i, err)
		}
		if err := host.Run(func() error {
			return podpolicy.Check(podpolicy.Interface{PodNS: pod.Path, IfName: "net1", Plan: &plan})
		}); err != nil {
			b.Fatalf("pod %d: %v", i, err)
		}
	}
	var size policySize
	err := nft.InNamespace(host.Path, func(c *nftables.Conn) (err error) {
		size, err = countHostPolicies(c)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return size
}

// policySize is what the ports' chains and sets in the host's policy
// tables hold: rules, sets (the maps left out) and set elements.
type policySize struct{ rules, sets, elems int }

// countHostPolicies counts the ports' rules, sets and set elements.
func countHostPolicies(c *nftables.Conn) (size policySize, err error) {
	for _, fam := range []nftables.TableFamily{nftables.TableFamilyINet, nftables.TableFamilyBridge} {
		t := &nftables.Table{Name: nft.HostPolicyTable, Family: fam}
		chains, err := c.ListChainsOfTableFamily(fam)
		if err != nil {
			return size, err
		}
		for _, ch := range chains {
			if ch.Table.Name != t.Name || ch.Hooknum != nil {
				continue
			}
			rs, err := c.GetRules(t, ch)
			if err != nil {
				return size, err
			}
			size.rules += len(rs)
		}
		sets, err := c.GetSets(t)
		if err != nil {
			return size, err
		}
		for _, s := range sets {
			if s.IsMap {
				continue
			}
			els, err := c.GetSetElements(s)
			if err != nil {
				return size, err
			}
			size.sets, size.elems = size.sets+1, size.elems+len(els)
		}
	}
	return size, nil
}

// heapMiB is the heap in use after a collection, in MiB: the agent's
// state, and the benchmark's own objects (claims, pods, policies).
func heapMiB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}
