package bench

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/plugins/qosport"
	"github.com/netclass-dev/netclass/shim/ruleagent"
	"github.com/netclass-dev/netclass/shim/sandboxes"
	"github.com/netclass-dev/netclass/test/nstest"
)

// BenchmarkQoSEditPrimary100Pods is BenchmarkQoSEdit100Attachments on the
// pods' primary interface: 100 pods with no claim, each eth0 a veth whose
// host end is a port of the host's bridge (as the upstream bridge plugin
// makes them), known from the node's sandbox record; one NetworkQoS
// without networkSelectors selects them all and is edited each iteration.
// Same measures, same target (p99 of the edit's effect < 1 s).
func BenchmarkQoSEditPrimary100Pods(b *testing.B) {
	host := nstest.New(b)
	src := &benchSources{dscp: 18, primary: true}
	host.Bridge(b, "ncbench")
	var list []sandboxes.Sandbox
	for i := range qosAttachments {
		pod := nstest.New(b)
		hostIf := fmt.Sprintf("ncp%03d", i)
		nstest.Veth(b, pod, "eth0", "", host, hostIf, "")
		host.Bridge(b, "ncbench", hostIf)
		uid := types.UID(fmt.Sprintf("pod-%d", i))
		list = append(list, sandboxes.Sandbox{Pod: types.NamespacedName{Namespace: "bench", Name: string(uid)}, UID: uid, ID: "sb", NetNS: pod.Path})
		src.peers = append(src.peers, benchAddr(i))
	}
	agent := ruleagent.New(src, src, src, src, src, inNamespace(host, qosport.SyncInterfaces))
	agent.Primary = ruleagent.NewPrimary(func() []sandboxes.Sandbox { return list },
		func(podNS, ifname string) (h string, err error) {
			err = host.Run(func() error { h, err = qosport.HostEnd(podNS, ifname); return err })
			return h, err
		},
		func(hostIf string) error { return host.Run(func() error { return qosport.RemovePortRules(hostIf) }) })
	benchDSCPEdits(b, agent, src, fmt.Sprintf("a NetworkQoS edit over %d pods' eth0", qosAttachments))
}
