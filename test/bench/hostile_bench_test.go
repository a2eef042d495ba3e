package bench

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netclass-dev/netclass/api/contract"
	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/shim/memlimit"
	"github.com/netclass-dev/netclass/shim/netpolicy"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/peers"
	"github.com/netclass-dev/netclass/shim/ruleagent"
	"github.com/netclass-dev/netclass/test/nstest"
)

// A node shared by two tenants: 50 pods of a hostile one, selected by the
// largest NetworkPolicy netclass's bounds let through, and 50 of another
// with an ordinary policy.
const (
	tenantPods            = 50
	hostileNS, neighborNS = "hostile", "neighbor"
)

// tenantSources serves the two tenants' pods, labels and policies.
type tenantSources struct {
	*benchSources
	ns     []string
	addrs  []netip.Addr
	byUID  map[types.UID]int
	policy map[string]*networkingv1.NetworkPolicy
}

func (s *tenantSources) Pod(ns, name string, uid types.UID) (*corev1.Pod, bool) {
	if _, ok := s.byUID[uid]; !ok {
		return nil, false
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Labels: map[string]string{"app": "server"}}}, true
}

// Endpoints resolves every selector to all pods of the namespaces it
// names (the pods have one label): the worst a selector can do.
func (s *tenantSources) Endpoints(ns string, to ncv1.Destination, _ network.Network) ([]peers.Endpoint, error) {
	var out []peers.Endpoint
	for i, pns := range s.ns {
		if pns == ns || to.NamespaceSelector != nil {
			out = append(out, peers.Endpoint{Addrs: []netip.Addr{s.addrs[i]}})
		}
	}
	return out, nil
}

func (s *tenantSources) list(ns string) ([]*networkingv1.NetworkPolicy, error) {
	if p, ok := s.policy[ns]; ok {
		return []*networkingv1.NetworkPolicy{p}, nil
	}
	return nil, nil
}

// hostilePolicy is as large as the bounds let through: a rule naming every
// pod of every namespace a hundred times (resolved once), then ingress
// rules from an ipBlock with the most excepts on the most ports, more than
// the attachment's budget of address and port ranges takes (the last ones
// are left out).
func hostilePolicy() *networkingv1.NetworkPolicy {
	p := tenantPolicy(hostileNS, "everything")
	excepts := make([]string, netpolicy.MaxExceptsPerBlock)
	for i := range excepts {
		excepts[i] = fmt.Sprintf("10.%d.%d.0/24", 1+i/100, 2*(i%100)) // apart: a range each
	}
	ports := make([]networkingv1.NetworkPolicyPort, netpolicy.MaxPortsPerRule)
	for i := range ports {
		ports[i] = port(corev1.ProtocolTCP, 1000+2*i, 0) // apart: a range each
	}
	everyone := make([]networkingv1.NetworkPolicyPeer, netpolicy.MaxPeersPerRule)
	for i := range everyone {
		everyone[i] = networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}}
	}
	p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: everyone, Ports: ports[:1]}}
	for range netpolicy.MaxRangesPerAttachment/(2*netpolicy.MaxPortsPerRule) + 5 {
		p.Spec.Ingress = append(p.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{
			From: []networkingv1.NetworkPolicyPeer{blockPeer("10.0.0.0/8", excepts...)}, Ports: slices.Clone(ports)})
	}
	return p
}

func tenantPolicy(ns, name string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}}
}

// shiftPorts moves every port of the policy by 1000, or back.
func shiftPorts(p *networkingv1.NetworkPolicy) {
	for _, r := range p.Spec.Ingress {
		for _, pp := range r.Ports {
			if pp.Port.IntVal < 20000 {
				*pp.Port = intstr.FromInt32(pp.Port.IntVal + 20000)
			} else {
				*pp.Port = intstr.FromInt32(pp.Port.IntVal - 20000)
			}
		}
	}
}

// BenchmarkNetworkPolicyHostileTenant measures what a hostile tenant's
// NetworkPolicies cost another tenant and netclass-dra: on a node with 50
// pods of each, the hostile tenant's pods all selected by the largest
// policy the bounds let through (10,000 address and port ranges per
// attachment, on the host side of the pods' bridged ports), each
// iteration edits both tenants' policies at once (the hostile one every
// port of its policy) and syncs: the other tenant's effect time is from
// the sync's start until its last pod's change was committed (a wait for
// the 250 ms between the agent's syncs, if any, comes on top and is not in
// the figures). It reports that time's p50/p99, the whole sync's, the CPU per
// edit and the process's peak RSS (the agent's, the kernel side real).
func BenchmarkNetworkPolicyHostileTenant(b *testing.B) {
	host := nstest.New(b)
	host.Bridge(b, "ncbench")
	src := &tenantSources{benchSources: &benchSources{}, byUID: map[types.UID]int{},
		policy: map[string]*networkingv1.NetworkPolicy{hostileNS: hostilePolicy(), neighborNS: tenantPolicy(neighborNS, "web")}}
	src.policy[neighborNS].Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{podPeer("app", "server")}, Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, 80, 0)}}}
	for i := range 2 * tenantPods {
		ns := []string{hostileNS, neighborNS}[i/tenantPods]
		_, claim := benchPod(b, host, i, ns, nil)
		src.claims = append(src.claims, claim)
		src.byUID[claim.Pods[0].UID] = i
		src.ns, src.addrs = append(src.ns, ns), append(src.addrs, benchAddr(i))
	}
	tenantOf := map[string]string{} // a pod's namespace path -> its tenant
	for i, c := range src.claims {
		tenantOf[c.Devices[0].Attachments[0].NetNS] = src.ns[i]
	}
	var neighborDone time.Time // when the last of the other tenant's pods held the edit
	kernel := func(items []podpolicy.Interface) []podpolicy.Result {
		res := podpolicy.Sync(items)
		for i, r := range res {
			if tenantOf[items[i].PodNS] == neighborNS && r.At.After(neighborDone) {
				neighborDone = r.At
			}
		}
		return res
	}
	agent := ruleagent.New(src, src, src, src, src, noQoS)
	agent.NetPol = &ruleagent.NetPolicies{List: src.list, Kernel: kernel, Peers: src}
	// netclass-dra's runtime limit in its DaemonSet (256 MiB, shim/memlimit)
	limit, _ := memlimit.Parse(strconv.Itoa(256 << 20))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(limit))
	sync := func() []ruleagent.Outcome {
		var outs []ruleagent.Outcome
		host.Do(b, func() error { outs = agent.Sync(context.Background()); return ruleagent.Errors(outs) })
		return outs
	}
	for _, o := range sync() {
		if o.Pod.Namespace == hostileNS && len(netpolicy.RuleErrors(o.PolicyIgnored)) == 0 {
			b.Fatal("the hostile policy is within the bounds: it must reach them")
		}
	}
	var times, neighbor []time.Duration
	var cpu time.Duration
	b.ResetTimer()
	for range b.N {
		shiftPorts(src.policy[hostileNS])
		shiftPorts(src.policy[neighborNS])
		before, start := cpuTime(b), time.Now()
		outs := sync()
		times, neighbor = append(times, time.Since(start)), append(neighbor, neighborDone.Sub(start))
		cpu += cpuTime(b) - before
		if n := changedIn(outs, neighborNS); n != tenantPods {
			b.Fatalf("the other tenant's edit reached %d of its %d pods", n, tenantPods)
		}
	}
	b.StopTimer()
	slices.Sort(times)
	slices.Sort(neighbor)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(neighbor[len(neighbor)/2]), "neighbor-p50-ms")
	b.ReportMetric(ms(neighbor[(len(neighbor)*99)/100]), "neighbor-p99-ms")
	b.ReportMetric(ms(times[len(times)/2]), "p50-ms/edit")
	b.ReportMetric(ms(times[(len(times)*99)/100]), "p99-ms/edit")
	b.ReportMetric(ms(cpu)/float64(b.N), "cpu-ms/edit")
	b.ReportMetric(peakRSSMiB(b), "peak-RSS-MiB")
	b.ReportMetric(heapMiB(), "heap-MiB")
}

func changedIn(outs []ruleagent.Outcome, ns string) int {
	n := 0
	for _, o := range outs {
		if o.Pod.Namespace == ns && o.PolicyChanged {
			n++
		}
	}
	return n
}

// peakRSSMiB is the process's peak resident set (VmHWM).
func peakRSSMiB(b *testing.B) float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kib, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				b.Fatal(err)
			}
			return kib / 1024
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}
