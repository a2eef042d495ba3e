//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/e2e/policyeval"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// polBed is the truth table's world: two namespaces on one VXLAN
// PodNetwork spanning two nodes, four pods with listeners on every probed
// port, and the oracle's view of them.
type polBed struct {
	nsA, nsB, network, subnet string
	pods                      []*polPod
	world                     policyeval.World
	// written are the policies the test created (namespace/name).
	written map[string]bool
}

// polPod is one pod of the bed.
type polPod struct {
	node    bed.Node
	eval    policyeval.Pod
	netns   string // its network namespace on this machine
	primary netip.Addr
	l       *harness.Listeners
}

func (p *polPod) String() string { return p.eval.Namespace + "/" + p.eval.Name }

// polPorts are the ports every probe pair tries over net1.
var polPorts = []struct {
	proto corev1.Protocol
	port  int
}{{corev1.ProtocolTCP, 80}, {corev1.ProtocolTCP, 8080}, {corev1.ProtocolTCP, 9005}, {corev1.ProtocolUDP, 53}, {corev1.ProtocolSCTP, 7777}}

// newPolBed creates the world: in namespace A (team=a) a web server on
// node 1 (named port http = TCP 8080) and a client on node 2; in namespace
// B (team=b) a client on node 1 and a web server on node 2.
func newPolBed(t *testing.T, e *harness.Env) *polBed {
	t.Helper()
	n1, n2 := twoNodes(t, e)
	class := e.Class(t, harness.PodNetworkKind)
	b := &polBed{network: "e2e-pol-" + harness.Unique(6), subnet: harness.RandomSubnet(), written: map[string]bool{}}
	e.PodNetwork(t, b.network, map[string]any{"type": "netclass-vxlan", "vni": harness.RandomVNI(),
		"ipam": map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": b.subnet}}}}}, nil)
	b.nsA, b.nsB = testbed.Namespace(t, e.Kube), testbed.Namespace(t, e.Kube)
	labelNamespace(t, e, b.nsA, map[string]string{"team": "a"})
	labelNamespace(t, e, b.nsB, map[string]string{"team": "b"})
	for _, n := range []bed.Node{n1, n2} {
		e.WaitDeviceOn(t, n.Name, class, "", b.network, true)
	}
	e.ClaimTemplate(t, b.nsA, "net", class, "", b.network, nil)
	e.ClaimTemplate(t, b.nsB, "net", class, "", b.network, nil)
	http := []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}
	specs := []struct {
		node     bed.Node
		ns, name string
		app      string
		ports    []corev1.ContainerPort
	}{{n1, b.nsA, "web", "web", http}, {n2, b.nsA, "client", "client", nil}, {n1, b.nsB, "client", "client", nil}, {n2, b.nsB, "web", "web", http}}
	var pods []*corev1.Pod
	for _, s := range specs {
		p := harness.PodOn(s.node.Name, s.ns, s.name, "net")
		p.Labels = map[string]string{"app": s.app}
		p.Spec.Containers[0].Ports = s.ports
		pods = append(pods, p)
	}
	e.RunPods(t, pods...)
	for i, s := range specs {
		addr := netip.MustParseAddr(harness.Addr(t, e.Attached(t, s.ns, s.name, "net", "net1")))
		pod := getPod(t, e, s.ns, s.name)
		pp := &polPod{node: s.node, primary: netip.MustParseAddr(pod.Status.PodIP),
			eval:  policyeval.Pod{Namespace: s.ns, Name: s.name, Labels: pods[i].Labels, Ports: s.ports, Addr: addr},
			netns: e.PodNetNS(t, s.node, pod.UID, "net1")}
		var tcp, udp []int
		for _, p := range polPorts {
			switch p.proto {
			case corev1.ProtocolTCP:
				tcp = append(tcp, p.port)
			case corev1.ProtocolUDP:
				udp = append(udp, p.port)
			}
		}
		pp.l = harness.Listen(t, pp.netns, tcp, udp)
		b.pods = append(b.pods, pp)
	}
	b.world = policyeval.World{Network: b.network, Namespaces: map[string]map[string]string{b.nsA: {"team": "a"}, b.nsB: {"team": "b"}}}
	return b
}

// polProbe is one probe: a client, a server, a port, over net1 or the
// primary interface.
type polProbe struct {
	src, dst *polPod
	proto    corev1.Protocol
	port     int
	primary  bool
}

func (p polProbe) String() string {
	via := "net1"
	if p.primary {
		via = "primary"
	}
	return fmt.Sprintf("%s -> %s %s/%d over %s", p.src, p.dst, p.proto, p.port, via)
}

// run probes once.
func (p polProbe) run(t *testing.T) bool {
	addr := p.dst.eval.Addr
	if p.primary {
		addr = p.dst.primary
	}
	open, err := harness.Probe(p.src.netns, p.proto, addr, p.port, p.dst.l)
	if err != nil {
		t.Errorf("probe %s: %v", p, err)
	}
	return open
}

// probes lists every (client, server, port, protocol) over net1, then TCP
// 80 over the primary interface for every pair.
func (b *polBed) probes() []polProbe {
	var out []polProbe
	for _, src := range b.pods {
		for _, dst := range b.pods {
			if src == dst {
				continue
			}
			for _, p := range polPorts {
				out = append(out, polProbe{src: src, dst: dst, proto: p.proto, port: p.port})
			}
			out = append(out, polProbe{src: src, dst: dst, proto: corev1.ProtocolTCP, port: 80, primary: true})
		}
	}
	return out
}

// runAll probes everything at once.
func runAll(t *testing.T, probes []polProbe) []bool {
	got := make([]bool, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = p.run(t)
		}()
	}
	wg.Wait()
	return got
}

// expect is the oracle's verdict; over the primary interface, the
// reachability seen with no policy.
func (b *polBed) expect(p polProbe, baseline map[string]bool) bool {
	if p.primary {
		return baseline[p.String()]
	}
	return b.world.Allowed(p.src.eval, p.dst.eval, p.proto, int32(p.port))
}

// apply makes the namespaces' policies the given ones (updating those of
// the same name in place) and returns when the last write returned.
func (b *polBed) apply(t *testing.T, e *harness.Env, pols []*networkingv1.NetworkPolicy) time.Time {
	t.Helper()
	ctx := testbed.Context(t, time.Minute)
	want := map[string]bool{}
	for _, p := range pols {
		want[p.Namespace+"/"+p.Name] = true
	}
	for key := range b.written {
		if want[key] {
			continue
		}
		ns, name, _ := strings.Cut(key, "/")
		if err := e.Kube.NetworkingV1().NetworkPolicies(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		delete(b.written, key)
	}
	for _, p := range pols {
		client := e.Kube.NetworkingV1().NetworkPolicies(p.Namespace)
		cur, err := client.Get(ctx, p.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = client.Create(ctx, p.DeepCopy(), metav1.CreateOptions{})
		case err == nil:
			cur.Labels, cur.Annotations, cur.Spec = p.Labels, p.Annotations, p.Spec
			_, err = client.Update(ctx, cur, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatalf("write NetworkPolicy %s/%s: %v", p.Namespace, p.Name, err)
		}
		b.written[p.Namespace+"/"+p.Name] = true
	}
	b.world.Policies = pols
	return time.Now()
}

// selectionChanges reports whether a pod of the bed is selected by other
// policies in the bed's world than in before.
func (b *polBed) selectionChanges(before policyeval.World) bool {
	for _, p := range b.pods {
		if !slices.Equal(before.Selecting(p.eval), b.world.Selecting(p.eval)) ||
			!slices.Equal(before.SelectingCluster(p.eval), b.world.SelectingCluster(p.eval)) {
			return true
		}
	}
	return false
}

// waitAgents waits until the agent of each node shows, for each of the
// bed's pods there, that its last sync applied to the pod's net1 exactly
// the policies that select it in the bed's world: the agents have seen the
// last write, and the kernel holds what they made of it.
func (b *polBed) waitAgents(t *testing.T, e *harness.Env, what string) {
	t.Helper()
	b.waitAgentsShow(t, e, what, harness.AgentHas)
}

// waitAgentsShow is waitAgents with the condition on one kind of policy
// (harness.AgentHas, harness.AgentHasMulti).
func (b *polBed) waitAgentsShow(t *testing.T, e *harness.Env, what string,
	has func(string, map[string][]string) func([]harness.AgentAttachment) (bool, string)) {
	t.Helper()
	b.waitAgentsList(t, e, what+": the policies applied to each pod", b.world.Selecting, has)
}

// waitAgentsList waits until each node's agent lists, for each of the
// bed's pods there, the policies selecting says select it in the bed's
// world (has checks one kind of policy's list).
func (b *polBed) waitAgentsList(t *testing.T, e *harness.Env, what string, selecting func(policyeval.Pod) []string,
	has func(string, map[string][]string) func([]harness.AgentAttachment) (bool, string)) {
	t.Helper()
	byNode := map[string]map[string][]string{}
	for _, p := range b.pods {
		if byNode[p.node.Name] == nil {
			byNode[p.node.Name] = map[string][]string{}
		}
		byNode[p.node.Name][p.String()] = selecting(p.eval)
	}
	for node, want := range byNode {
		e.DRAOn(node).WaitAgent(t, what, has("net1", want))
	}
}

// effect measures how long after written the probe first shows the
// verdict: probes start every 50 ms, and the first one started that
// answers with the verdict dates the change (a dropped probe's packet was
// dropped when it was sent).
func effect(t *testing.T, p polProbe, verdict bool, written time.Time) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveTimeout)
	defer cancel()
	type answer struct {
		start time.Time
		open  bool
	}
	answers := make(chan answer, 1024)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	first := time.Time{}
	for first.IsZero() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: open=%v not seen within %v", p, verdict, liveTimeout)
		case <-tick.C:
			wg.Add(1)
			go func() {
				defer wg.Done()
				start := time.Now()
				answers <- answer{start, p.run(t)}
			}()
		case a := <-answers:
			if a.open == verdict {
				first = a.start
			}
		}
	}
	go func() { wg.Wait(); close(answers) }()
	for a := range answers { // an earlier probe still in flight may date it sooner
		if a.open == verdict && a.start.Before(first) {
			first = a.start
		}
	}
	return max(0, first.Sub(written))
}
