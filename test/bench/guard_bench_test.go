package bench

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/ruleagent"
	"github.com/netclass-dev/netclass/test/nstest"
)

// BenchmarkNetworkPolicyNewPort100Pods50Policies measures a new
// attachment's policy, the part of RunPodSandbox after its ADD
// (ruleagent.Guard, which netclass-dra's NRI hook runs before the pod's
// containers start), on the node of BenchmarkNetworkPolicyEdit100Pods50Policies
// (100 attachments holding 50 policies). Each iteration adds a pod's port
// as its ADD leaves it (a bridge port, guarded, closed) and times Guard
// until the port is open: in turn a pod of the policies' namespace, which
// 14 to 16 of them select, and a pod of another namespace, which none
// selects. It reports the p50/p99 of each.
func BenchmarkNetworkPolicyNewPort100Pods50Policies(b *testing.B) {
	host, src, _ := polNode(b)
	agent := ruleagent.New(src, src, src, src, src, noQoS)
	agent.NetPol = &ruleagent.NetPolicies{Kernel: inHost(host, podpolicy.Sync), Peers: src, List: src.list}
	_, outs := runAgent(b, agent)
	if err := firstSync(outs); err != nil {
		b.Fatal(err)
	}
	var selected, unselected []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		ns := "other"
		if i%2 == 0 {
			ns = polNamespace
		}
		p := newPort(b, host, polPods+i, ns)
		b.StartTimer()
		start := time.Now()
		if err := agent.Guard(context.Background(), p.pod, p.claim, &p.dev, p.dev.Attachments[0]); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		b.StopTimer()
		if ns == polNamespace {
			selected = append(selected, took)
		} else {
			unselected = append(unselected, took)
		}
		p.checkOpen(b, host)
		b.StartTimer()
	}
	b.StopTimer()
	for _, m := range []struct {
		name  string
		times []time.Duration
	}{{"selected", selected}, {"unselected", unselected}} {
		b.Logf("a new port's policy (%s pod, %d of them): p50 %v, p99 %v", m.name, len(m.times), round(percentile(m.times, 50)), round(percentile(m.times, 99)))
		b.ReportMetric(ms(percentile(m.times, 50)), "ms-p50-"+m.name)
		b.ReportMetric(ms(percentile(m.times, 99)), "ms-p99-"+m.name)
	}
}

// newPortPod is a pod's attachment as its ADD just left it.
type newPortPod struct {
	pod    *corev1.Pod
	claim  types.UID
	dev    checkpoint.Device
	hostIf string
}

// newPort makes the i-th pod of namespace ns (labelled as the policies'
// pods are), its port on the node's bridge, guarded and closed.
func newPort(b *testing.B, host *nstest.NS, i int, ns string) newPortPod {
	pod := nstest.New(b)
	hostIf := fmt.Sprintf("ncb%03d", i)
	nstest.Veth(b, pod, "net1", "", host, hostIf, "")
	host.Bridge(b, "ncbench", hostIf)
	mac, addr := pod.Link(b, "net1").Attrs().HardwareAddr, benchAddr(i)
	if err := nft.InNamespace(host.Path, func(c *nftables.Conn) error {
		return nft.InstallGuard(c, hostIf, nft.Guard{MAC: mac, CheckIPs: true, V4: []netip.Addr{addr}}, true)
	}); err != nil {
		b.Fatal(err)
	}
	uid := types.UID(fmt.Sprintf("pod-%d", i))
	at := checkpoint.Attachment{PodUID: uid, SandboxID: fmt.Sprintf("sb-%d", i), NetNS: pod.Path, IfName: "net1", State: checkpoint.Attached,
		Result: &checkpoint.Result{InterfaceName: "net1", MAC: mac.String(), IPs: []string{addr.String() + "/16"}}}
	return newPortPod{
		pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: string(uid), UID: uid,
			Labels: map[string]string{"app": polApps[i%3], "tier": polTiers[i%5]}}},
		claim:  types.UID(fmt.Sprintf("claim-%d", i)),
		dev:    checkpoint.Device{Device: "bench", Pool: "node", Network: benchNet, Attachments: []checkpoint.Attachment{at}},
		hostIf: hostIf,
	}
}

func (p newPortPod) checkOpen(b *testing.B, host *nstest.NS) {
	if err := nft.InNamespace(host.Path, func(c *nftables.Conn) error {
		closed, err := nft.GuardClosed(c)
		if err == nil && closed[p.hostIf] {
			err = fmt.Errorf("port %s still closed after its policy", p.hostIf)
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
}
