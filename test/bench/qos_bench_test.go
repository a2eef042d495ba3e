package bench

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/ruleagent"
	"github.com/netclass-dev/netclass/test/nstest"
)

// qosAttachments is the number of running attachments of the node.
const qosAttachments = 100

var benchNet = attachment.NetworkRef{Class: "c", Group: "multinetwork.k8s.io", Version: "v1", Kind: "PodNetwork", Name: "bench"}

type benchSources struct {
	claims []*checkpoint.Claim
	dscp   int32
	peers  []netip.Addr
	// primary: the object selects the default network (no
	// networkSelectors) instead of every netclass network.
	primary bool
}

func (s *benchSources) Claims() []*checkpoint.Claim { return s.claims }
func (s *benchSources) Locked(_ context.Context, uids []types.UID, fn func(map[types.UID]*checkpoint.Claim) error) error {
	now := map[types.UID]*checkpoint.Claim{}
	for _, c := range s.claims {
		if slices.Contains(uids, c.UID) {
			now[c.UID] = c
		}
	}
	return fn(now)
}
func (s *benchSources) Lookup(string) (network.Offer, bool) {
	return network.Offer{Network: network.Network{Ref: benchNet}}, true
}
func (s *benchSources) NetworkQoS(ns string) ([]*ncv1.NetworkQoS, error) {
	q := []*ncv1.NetworkQoS{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edited"},
		Spec: ncv1.NetworkQoSSpec{NetworkSelectors: ncv1.NetworkSelectors{{NetworkSelectionType: ncv1.PodNetworks, PodNetworkSelector: &metav1.LabelSelector{}},
			{NetworkSelectionType: ncv1.Networks, NetworkSelector: &metav1.LabelSelector{}}}, Egress: []ncv1.Rule{
			{DSCP: s.dscp, Classifier: &ncv1.Classifier{To: []ncv1.Destination{{PodSelector: &metav1.LabelSelector{}}}}},
			{DSCP: 10, Bandwidth: &ncv1.Bandwidth{Rate: ptr(int64(10_000))}},
		}}}}
	if s.primary {
		q[0].Spec.NetworkSelectors = nil
	}
	return q, nil
}
func (s *benchSources) Pod(ns, name string, uid types.UID) (*corev1.Pod, bool) {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Labels: map[string]string{"app": "bench"}}}, true
}
func (s *benchSources) Addresses(string, ncv1.Destination, network.Network) ([]netip.Addr, error) {
	return s.peers, nil
}

func ptr[T any](v T) *T { return &v }

// benchPod makes the i-th pod of a benchmark node: its namespace, whose
// net1 is a veth with its host end a port of host's bridge ncbench, and
// its claim in namespace ns, attached (the result recording net1's MAC, as
// an ADD's does), the device's QoS as given.
func benchPod(b *testing.B, host *nstest.NS, i int, ns string, devQoS *checkpoint.DeviceQoS) (*nstest.NS, *checkpoint.Claim) {
	pod := nstest.New(b)
	hostIf := fmt.Sprintf("ncb%03d", i)
	nstest.Veth(b, pod, "net1", "", host, hostIf, "")
	host.Bridge(b, "ncbench", hostIf)
	uid := types.UID(fmt.Sprintf("pod-%d", i))
	result := &checkpoint.Result{InterfaceName: "net1", MAC: pod.Link(b, "net1").Attrs().HardwareAddr.String()}
	return pod, &checkpoint.Claim{UID: types.UID(fmt.Sprintf("claim-%d", i)), Namespace: ns, Name: string(uid),
		Pods: []checkpoint.Pod{{UID: uid, Namespace: ns, Name: string(uid)}},
		Devices: []checkpoint.Device{{Device: "bench", Pool: "node", Network: benchNet, QoS: devQoS,
			Attachments: []checkpoint.Attachment{{PodUID: uid, SandboxID: "sb", NetNS: pod.Path, IfName: "net1", State: checkpoint.Attached, Result: result}}}},
	}
}

// benchAddr is the i-th pod's address.
func benchAddr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 77, byte(i / 250), byte(1 + i%250)})
}

// BenchmarkQoSEdit100Attachments measures netclass-dra's rule agent on a
// node with 100 running attachments (veths whose host ends are ports of a
// bridge, in a host namespace of the benchmark's) when one NetworkQoS that
// selects every pod is edited (its DSCP): each iteration is one edit and
// the sync that brings all 100 attachments' rules to it in place, the
// rule's 100 peer addresses untouched; the ports' changes go in one
// nftables transaction. The agent runs as in netclass-dra (Run): the edit
// triggers it as an informer event does, and it syncs once 250 ms have
// passed since its last sync started. It reports the p50/p99 time from the edit
// until all attachments hold it (that wait included, the API server's
// and the informer's delivery not) and fails when the p99 misses
// effectTarget; also the syncs' own p50/p99 and the CPU time per edit.
// The API side is faked; the kernel side is real.
func BenchmarkQoSEdit100Attachments(b *testing.B) {
	host := nstest.New(b)
	src := &benchSources{dscp: 18}
	host.Bridge(b, "ncbench")
	for i := range qosAttachments {
		_, claim := benchPod(b, host, i, "bench", &checkpoint.DeviceQoS{})
		src.claims = append(src.claims, claim)
		src.peers = append(src.peers, benchAddr(i))
	}
	agent := ruleagent.New(src, src, src, src, src, inNamespace(host, qosport.SyncInterfaces))
	benchDSCPEdits(b, agent, src, fmt.Sprintf("a NetworkQoS edit over %d attachments", qosAttachments))
}

// benchDSCPEdits runs the agent, then edits the NetworkQoS's DSCP b.N
// times, each edit to reach every attachment, and reports the times.
func benchDSCPEdits(b *testing.B, agent *ruleagent.Agent, src *benchSources, what string) {
	live, first := runAgent(b, agent) // the rules the pods start with
	if err := allChanged(first); err != nil {
		b.Fatal(err)
	}
	var times editTimes
	b.ResetTimer()
	for i := range b.N {
		before := cpuTime(b)
		effect, s := live.edit(b, func() { src.dscp = int32(20 + i%30) })
		times.add(effect, s.took, cpuTime(b)-before)
		if err := allChanged(s.outs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	times.report(b, what)
}

// inNamespace runs the agent's kernel side in the host namespace (where
// the bridge ports are), as netclass-dra runs in the node's.
func inNamespace(host *nstest.NS, kernel ruleagent.Kernel) ruleagent.Kernel {
	return func(items []ruleagent.Item) []ruleagent.Result {
		var out []ruleagent.Result
		if err := host.Run(func() error { out = kernel(items); return nil }); err != nil {
			out = make([]ruleagent.Result, len(items))
			for i := range out {
				out[i].Err = err
			}
		}
		return out
	}
}

// allChanged checks that a sync updated every attachment's rules.
func allChanged(outs []ruleagent.Outcome) error {
	if len(outs) != qosAttachments {
		return fmt.Errorf("%d attachments synced, want %d", len(outs), qosAttachments)
	}
	for _, o := range outs {
		if o.Err != nil || !o.Changed {
			return fmt.Errorf("attachment of %s: changed %v, %v", o.Pod, o.Changed, o.Err)
		}
	}
	return nil
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
