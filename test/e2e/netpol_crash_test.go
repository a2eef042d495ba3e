//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netclass-dev/netclass/shim/nri"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/e2e/policyeval"
	"github.com/netclass-dev/netclass/test/testbed"
)

// netclass-dra dies (SIGKILL, injected) between a new pod's ADD and the
// installation of its policy. The pod's port, which ADD left closed,
// passes nothing while the daemon is down: the policy's denied flows are
// probed from the pod's first moment to the end and never answered, and
// even its allowed ones are closed. Once the daemon is back, it secures
// the attachment: the allowed flows open, the denied ones stay closed.
func TestKilledBetweenAddAndPolicy(t *testing.T) {
	e := harness.Shared(t)
	b := newPolBed(t, e)
	d := e.DRAOn(e.Node)
	restartAtEnd(t, d)
	web, client := b.pods[0], b.pods[1] // namespace A's server (node 1) and client (node 2)
	victimSel := map[string]string{"app": "victim"}
	b.apply(t, e, pols(np(b.nsA, "victim", victimSel,
		fromOn(peer(nil, sel("app", "client")), port(corev1.ProtocolTCP, intstr.FromInt32(80), nil)),
		to(peer(nil, sel("app", "web")), port(corev1.ProtocolTCP, intstr.FromInt32(80), nil)))))
	faults := filepath.Join(d.StateDir, "faults")
	if err := os.MkdirAll(faults, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(faults, nri.FaultAfterAdd), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exited := d.Exited()
	p := harness.PodOn(e.Node, b.nsA, "victim", "net")
	p.Labels = victimSel
	e.CreatePod(t, p)
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("netclass-dra did not reach the fault after the victim's ADD")
	}
	if err := d.Kill(); err != nil { // reaps the dead process
		t.Fatal(err)
	}
	t.Logf("%v netclass-dra died between the victim's ADD and its policy", time.Now().Format("15:04:05.0"))
	victim := b.victim(t, e, getPod(t, e, b.nsA, "victim").UID)
	denied := []polProbe{
		{src: client, dst: victim, proto: corev1.ProtocolTCP, port: 8080},
		{src: b.pods[2], dst: victim, proto: corev1.ProtocolTCP, port: 80},
		{src: victim, dst: web, proto: corev1.ProtocolTCP, port: 8080},
		{src: victim, dst: b.pods[3], proto: corev1.ProtocolTCP, port: 80},
	}
	allowed := []polProbe{{src: client, dst: victim, proto: corev1.ProtocolTCP, port: 80}, {src: victim, dst: web, proto: corev1.ProtocolTCP, port: 80}}
	stop := watchClosed(t, denied)
	for i, open := range runAll(t, allowed) {
		if open {
			t.Errorf("with netclass-dra down, %s answered: the port was open before its policy was in place", allowed[i])
		}
	}
	restart(t, d)
	testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond, "the victim's allowed flows open once netclass-dra is back",
		func(context.Context) (bool, string, error) {
			got := runAll(t, allowed)
			return got[0] && got[1], fmt.Sprint(got), nil
		})
	if n := stop(); n == 0 {
		t.Error("the denied flows were never probed")
	}
}

// victim is the pod's view for probes: its network namespace on node 1,
// read from netclass-dra's checkpoint (which recorded it before the ADD),
// its address on net1, listeners on the probed ports.
func (b *polBed) victim(t *testing.T, e *harness.Env, uid types.UID) *polPod {
	t.Helper()
	netns := e.PodNetNS(t, b.pods[0].node, uid, "net1")
	var addr netip.Addr
	err := ns.WithNetNSPath(netns, func(ns.NetNS) error {
		ifi, err := net.InterfaceByName("net1")
		if err != nil {
			return err
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() {
				addr = p.Addr()
			}
		}
		return nil
	})
	if err != nil || !addr.IsValid() {
		t.Fatalf("the victim's net1: %v (address %v)", err, addr)
	}
	return &polPod{node: b.pods[0].node, netns: netns, l: harness.Listen(t, netns, []int{80, 8080}, []int{53}),
		eval: policyeval.Pod{Namespace: b.nsA, Name: "victim", Labels: map[string]string{"app": "victim"}, Addr: addr}}
}
