//go:build testbed

package e2e

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/netclass-dev/netclass/plugins/kernel/nft"
	"github.com/netclass-dev/netclass/shim/checkpoint"
	"github.com/netclass-dev/netclass/shim/netpolicy"
	"github.com/netclass-dev/netclass/shim/network"
	"github.com/netclass-dev/netclass/shim/peers"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
)

// netclass-dra on node 1 is SIGKILLed while the policies of the pods it
// serves change, and more changes land while it is down. Probes to a port
// no policy ever opens on node 1's web server run from before the first
// change until the end and are never answered; once the daemon is back,
// every policy table of node 1's attachments equals the plan computed here
// from the API objects (shim/netpolicy, nft.CheckPolicy), and the truth
// table holds again.
func TestNetworkPolicySurvivesSIGKILL(t *testing.T) {
	e := harness.Shared(t)
	b := newPolBed(t, e)
	d := e.DRAOn(e.Node)
	restartAtEnd(t, d)
	web := b.pods[0] // namespace A's server, on node 1
	onWeb := map[string]string{"app": "web"}
	step := func(i int) {
		t.Helper()
		open := []int32{80, 8080}[i%2] // never 9005
		ps := pols(np(b.nsA, "web", onWeb, fromOn(peer(nil, sel("app", "client")), port(corev1.ProtocolTCP, intstr.FromInt32(open), nil))))
		if i%3 == 0 {
			ps = append(ps, np(b.nsA, "web-b", onWeb, fromOn(peer(sel("team", "b"), nil), port(corev1.ProtocolUDP, intstr.FromInt32(53), nil))))
		}
		b.apply(t, e, ps)
	}
	step(0)
	closed := []polProbe{{src: b.pods[1], dst: web, proto: corev1.ProtocolTCP, port: 9005}, {src: b.pods[2], dst: web, proto: corev1.ProtocolTCP, port: 9005}}
	testbed.Poll(t, testbed.Context(t, liveTimeout), 100*time.Millisecond, "the web server isolated", func(context.Context) (bool, string, error) {
		got := runAll(t, closed)
		return !got[0] && !got[1], fmt.Sprint(got), nil
	})
	stop := watchClosed(t, closed)
	for i := 1; i < 8; i++ {
		step(i)
	}
	kill(t, d)
	for i := 8; i < 16; i++ {
		step(i)
	}
	restart(t, d)
	for i := 16; i < 24; i++ {
		step(i)
	}
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
// bed's namespaces on node 1 with the plan the API objects give it now.
func policiesMatchObjects(ctx context.Context, e *harness.Env, b *polBed) error {
	claims, err := e.Checkpoint()
	if err != nil {
		return err
	}
	resolver := peers.Resolver{API: peers.ClientAPI{Client: e.Kube}, Context: func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, 10*time.Second)
	}}
	var errs []error
	checked := 0
	for _, c := range claims {
		if c.Namespace != b.nsA && c.Namespace != b.nsB {
			continue
		}
		list, err := e.Kube.NetworkingV1().NetworkPolicies(c.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var pols []*networkingv1.NetworkPolicy
		for i := range list.Items {
			pols = append(pols, &list.Items[i])
		}
		for _, dev := range c.Devices {
			for _, at := range dev.Attachments {
				errs = append(errs, policyMatches(ctx, e, c, network.Network{Ref: dev.Network}, at, pols, resolver))
				checked++
			}
		}
	}
	if checked == 0 {
		errs = append(errs, errors.New("no attachment of the bed's namespaces in node 1's checkpoint"))
	}
	return errors.Join(errs...)
}

func policyMatches(ctx context.Context, e *harness.Env, c *checkpoint.Claim, net network.Network, at checkpoint.Attachment,
	pols []*networkingv1.NetworkPolicy, resolver peers.Resolver) error {
	var name string
	for _, p := range c.Pods {
		if p.UID == at.PodUID {
			name = p.Name
		}
	}
	pod, err := e.Kube.CoreV1().Pods(c.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var ports []corev1.ContainerPort
	for _, ct := range pod.Spec.Containers {
		ports = append(ports, ct.Ports...)
	}
	plan, _, err := netpolicy.Compile(pols, netpolicy.Target{Namespace: c.Namespace, Labels: pod.Labels, Ports: ports, Network: net}, resolver)
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", c.Namespace, name, err)
	}
	err = nft.InNamespace(at.NetNS, func(conn *nftables.Conn) error { return nft.CheckPolicy(conn, at.IfName, &plan) })
	if err != nil {
		return fmt.Errorf("pod %s/%s: %w", c.Namespace, name, err)
	}
	return nil
}
