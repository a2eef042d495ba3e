//go:build testbed

package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	mnpclient "github.com/k8snetworkplumbingwg/multi-networkpolicy/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/netclass-dev/netclass/plugins/podpolicy"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/netpolicy"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// netclass-dra on node 1 is SIGKILLed while the policies of the pods it
// serves change, and more changes land while it is down. Probes to a port
// no policy ever opens on node 1's web server run from before the first
// change until the end and are never answered; once the daemon is back,
// every policy table of node 1's attachments equals the plan computed here
// from the API objects (shim/netpolicy, podpolicy.Check: on the host side
// of the bridged ports, the ports guarded and open), and the truth
// table holds again.
func TestNetworkPolicySurvivesSIGKILL(t *testing.T) {
	e := harness.Shared(t)
	b := newPolBed(t, e)
	survivesSIGKILL(t, e, b, func(ps []*networkingv1.NetworkPolicy) { b.apply(t, e, ps) })
}

// survivesSIGKILL is the test's body, the policies written by write (as
// the kind under test; b.world their oracle's view).
func survivesSIGKILL(t *testing.T, e *harness.Env, b *polBed, write func([]*networkingv1.NetworkPolicy)) {
	t.Helper()
	onWeb := map[string]string{"app": "web"}
	killDuringEdits(t, e, b, func(i int) {
		t.Helper()
		open := []int32{80, 8080}[i%2] // never 9005
		ps := pols(np(b.nsA, "web", onWeb, fromOn(peer(nil, sel("app", "client")), port(corev1.ProtocolTCP, intstr.FromInt32(open), nil))))
		if i%3 == 0 {
			ps = append(ps, np(b.nsA, "web-b", onWeb, fromOn(peer(sel("team", "b"), nil), port(corev1.ProtocolUDP, intstr.FromInt32(53), nil))))
		}
		write(ps)
	})
}

// killDuringEdits SIGKILLs node 1's netclass-dra amid the edits step(i)
// makes (each isolating namespace A's web server on node 1, TCP 9005 never
// open to its clients), restarts it, and checks what the test says.
func killDuringEdits(t *testing.T, e *harness.Env, b *polBed, step func(int)) {
	t.Helper()
	d := e.DRAOn(e.Node)
	restartAtEnd(t, d)
	web := b.pods[0] // namespace A's server, on node 1
	step(0)
	closed := []polProbe{{src: b.pods[1], dst: web, proto: corev1.ProtocolTCP, port: 9005}, {src: b.pods[2], dst: web, proto: corev1.ProtocolTCP, port: 9005}}
	testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond, "the web server isolated", func(context.Context) (bool, string, error) {
		got := runAll(t, closed)
		return !got[0] && !got[1], fmt.Sprint(got), nil
	})
	stop := watchClosed(t, closed)
	stormAcrossKill(t, d, 1, 8, step)
	testbed.Poll(t, testbed.Context(t, liveTimeout), 250*time.Millisecond, "node 1's policy tables equal what the objects say",
		func(context.Context) (bool, string, error) {
			err := policiesMatchObjects(testbed.Context(t, time.Minute), e, b)
			return err == nil, fmt.Sprint(err), nil
		})
	probes := b.probes()
	testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond, "every probe as policyeval says after the restart",
		func(context.Context) (bool, string, error) {
			got := runAll(t, probes)
			for j, p := range probes {
				if !p.primary && got[j] != b.expect(p, nil) {
					return false, fmt.Sprintf("%s: open=%v", p, got[j]), nil
				}
			}
			return true, "", nil
		})
	if n := stop(); n == 0 {
		t.Error("the watch never probed")
	}
}

// watchClosed probes again and again until stopped, failing the test at
// any answer; stop returns the number of rounds.
func watchClosed(t *testing.T, probes []polProbe) (stop func() int) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	rounds := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			for i, open := range runAll(t, probes) {
				if open {
					t.Errorf("%v %s answered: the pod was open", time.Now().Format("15:04:05.000"), probes[i])
				}
			}
			rounds++
		}
	}()
	var once sync.Once
	stop = func() int {
		once.Do(func() { close(done); wg.Wait() })
		return rounds
	}
	t.Cleanup(func() { stop() })
	return stop
}

// policiesMatchObjects compares the policy table of every attachment of the
// bed's namespaces on node 1 with the plan the API objects (NetworkPolicies,
// MultiNetworkPolicies and ClusterNetworkPolicies) give it now.
func policiesMatchObjects(ctx context.Context, e *harness.Env, b *polBed) error {
	resolver := apiResolver(ctx, e)
	multi, err := mnpclient.NewForConfig(e.Rest)
	if err != nil {
		return err
	}
	return eachAttachment(ctx, e, []string{b.nsA, b.nsB}, func(pod *corev1.Pod, dev checkpoint.Device, at checkpoint.Attachment) error {
		in, err := policiesOf(ctx, e, multi, pod.Namespace)
		if err != nil {
			return err
		}
		var ports []corev1.ContainerPort
		for _, ct := range pod.Spec.Containers {
			ports = append(ports, ct.Ports...)
		}
		ns, err := e.Kube.CoreV1().Namespaces().Get(ctx, pod.Namespace, metav1.GetOptions{})
		if err != nil {
			return err
		}
		plan, _, err := netpolicy.CompileAll(in, netpolicy.Target{Namespace: pod.Namespace, Labels: pod.Labels, NamespaceLabels: ns.Labels,
			Ports: ports, Network: network.Network{Ref: dev.Network}}, resolver)
		if err != nil {
			return err
		}
		return podpolicy.Check(podpolicy.NewInterface(at.NetNS, at.IfName, at.Result.MAC, at.Result.IPs, &plan))
	})
}

// policiesOf lists a namespace's NetworkPolicies and MultiNetworkPolicies,
// and the ClusterNetworkPolicies.
func policiesOf(ctx context.Context, e *harness.Env, multi mnpclient.Interface, ns string) (netpolicy.Policies, error) {
	var in netpolicy.Policies
	list, err := e.Kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, err
	}
	for i := range list.Items {
		in.NetworkPolicies = append(in.NetworkPolicies, &list.Items[i])
	}
	mlist, err := multi.K8sCniCncfIoV1beta1().MultiNetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, err
	}
	for i := range mlist.Items {
		in.Multi = append(in.Multi, &mlist.Items[i])
	}
	cluster, err := cnpclient.NewForConfig(e.Rest)
	if err != nil {
		return in, err
	}
	clist, err := cluster.PolicyV1beta1().ClusterNetworkPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, err
	}
	for i := range clist.Items {
		in.Cluster = append(in.Cluster, &clist.Items[i])
	}
	return in, nil
}
