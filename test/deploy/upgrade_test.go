//go:build testbed

package deploy

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/qos"
	demotraffic "github.com/netclass-dev/netclass/demo/traffic"
	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/repo"
	"github.com/netclass-dev/netclass/test/testbed"
)

// previousRelease is the release an upgrade starts from (and a rollback returns to): its
// tag names the image, its commit (an ancestor of every later one, so present in any
// checkout with history, tags fetched or not) is what the image is built from. Move both to
// the last release when making a new one.
const (
	previousRelease       = "v0.2.0"
	previousReleaseCommit = "a9d9cc0f197c65371bdeeecfa9fe4931c9cd380f"
)

// upgradeTimeout bounds a DaemonSet rollout to another image on every node.
const upgradeTimeout = 3 * time.Minute

// A running netclass is upgraded from the previous release to this tree's image with
// `helm upgrade`, then rolled back with `helm rollback`, while the client pings another pod
// over net1 every 100 ms and that pod knocks on the server's TCP/80, which a NetworkPolicy
// closes to it, again and again: no attachment is deleted or made again (each
// net1 keeps its ifindex and MAC), no ping is lost, every ping the other pod receives
// carries the client's DSCP 46, and no knock gets through, from before the upgrade to after the rollback.
func TestUpgradeAndRollbackKeepAttachments(t *testing.T) {
	e := harness.Bare(t)
	prevImage := "localhost/netclass/netclass:" + previousRelease
	t.Cleanup(func() { // after helm uninstall (registered later, run earlier)
		if out, err := runOut("", nil, "bash", releaseScript(t), "release", prevImage); err != nil {
			t.Errorf("deploy.sh release %s: %v\n%s", prevImage, err, out)
		}
	})
	h := installChartWith(t, e, previousRelease, buildImageFrom(t, checkoutOf(t, previousReleaseCommit), prevImage))
	u := startUpgradeWorkload(t, e)
	before := u.links()
	stop := u.watch()

	if err := h.run("upgrade", "netclass", "conf/helm/netclass", "--namespace", namespace, "-f", h.values, "--set", "image.tag=latest"); err != nil {
		t.Fatal(err)
	}
	u.rolledTo(Image)
	u.sameLinks(before, "after the upgrade")
	if err := h.run("rollback", "netclass", "1", "--namespace", namespace); err != nil {
		t.Fatal(err)
	}
	u.rolledTo(prevImage)
	u.sameLinks(before, "after the rollback")
	stop()
}

// upgrade is the workload the test watches through the upgrade and the rollback.
type upgrade struct {
	t         *testing.T
	e         *harness.Env
	ns        string
	addr      map[string]string
	netns     map[string]*demotraffic.NS
	listeners *harness.Listeners
}

// startUpgradeWorkload runs client (DSCP 46 from its claim), server (a NetworkPolicy lets
// only the client in, on TCP/80) and other on a bridge PodNetwork of node 1.
func startUpgradeWorkload(t *testing.T, e *harness.Env) *upgrade {
	n1 := e.Nodes[0]
	net := e.BridgeNet(t, "upgrade", "plain")
	u := &upgrade{t: t, e: e, ns: net.Namespace, addr: map[string]string{}, netns: map[string]*demotraffic.NS{}}
	ef := 46
	e.ClaimTemplate(t, u.ns, "marked", net.Class, "", net.PodNetwork, &contract.AttachmentConfig{QoS: &qos.Spec{DSCP: &ef}})
	client := harness.PodOn(n1.Name, u.ns, "client", "marked")
	client.Labels = map[string]string{"role": "client"}
	server := harness.PodOn(n1.Name, u.ns, "server", "plain")
	server.Labels = map[string]string{"role": "server"}
	e.RunPods(t, client, server, harness.PodOn(n1.Name, u.ns, "other", "plain"))
	for pod, tmpl := range map[string]string{"client": "marked", "server": "plain", "other": "plain"} {
		u.addr[pod] = harness.Addr(t, e.Attached(t, u.ns, pod, tmpl, "net1"))
		p, err := e.Kube.CoreV1().Pods(u.ns).Get(testbed.Context(t, time.Minute), pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.netns[pod] = podNetNS(t, n1, pod, p.UID)
	}
	u.listeners = harness.Listen(t, u.netns["server"].Path, []int{80}, nil)
	createServerPolicy(t, e, u.ns)
	u.knock("client", true)
	u.knock("other", false)
	return u
}

// knock waits until from → server TCP/80 is open (or closed), a policy's effect time.
func (u *upgrade) knock(from string, open bool) {
	u.t.Helper()
	to := netip.MustParseAddr(u.addr["server"])
	testbed.Poll(u.t, testbed.Context(u.t, 30*time.Second), 50*time.Millisecond, fmt.Sprintf("%s → server TCP/80 open=%v", from, open),
		func(context.Context) (bool, string, error) {
			got, err := harness.Probe(u.netns[from].Path, corev1.ProtocolTCP, to, 80, u.listeners)
			return err == nil && got == open, fmt.Sprintf("open=%v", got), err
		})
}

// watch starts the pings, the capture on the receiver's net1 and the knocks; the returned stop
// ends them and checks what they saw.
func (u *upgrade) watch() (stop func()) {
	t := u.t
	s, err := demotraffic.Sniff(u.netns["other"], "net1") // what the receiver gets
	if err != nil {
		t.Fatalf("capture on the net1 of other: %v", err)
	}
	pings := u.ping("client", u.addr["other"]) // the server's policy lets no ICMP in
	knocks, opened := 0, 0
	done := make(chan struct{})
	var wg sync.WaitGroup
	to := netip.MustParseAddr(u.addr["server"])
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond): // the knocks' pace, not a wait for a state
			}
			if open, err := harness.Probe(u.netns["other"].Path, corev1.ProtocolTCP, to, 80, u.listeners); err == nil {
				knocks++
				if open {
					opened++
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		sent, received := pings()
		s.Close()
		u.checkMarks(s.Packets())
		if sent < 10 || received != sent {
			t.Errorf("client → other over net1 through the upgrade and the rollback: %d pings sent, %d answered", sent, received)
		}
		if knocks < 3 || opened > 0 {
			t.Errorf("other → server TCP/80 through the upgrade and the rollback: %d of %d knocks got in", opened, knocks)
		}
		t.Logf("through the upgrade and the rollback: %d pings over net1, %d answered; %d knocks on the server's closed port, %d in", sent, received, knocks, opened)
	}
}

// checkMarks: every ping of the client the other pod received carries DSCP 46.
func (u *upgrade) checkMarks(pkts []demotraffic.Packet) {
	from, to := netip.MustParseAddr(u.addr["client"]), netip.MustParseAddr(u.addr["other"])
	marked, unmarked := 0, 0
	for _, p := range pkts {
		if p.Src != from || p.Dst != to || p.Proto != 1 {
			continue
		}
		if p.DSCP == 46 {
			marked++
		} else {
			unmarked++
		}
	}
	if marked < 10 || unmarked > 0 {
		u.t.Errorf("the client's pings received on the net1 of other: %d marked EF, %d not", marked, unmarked)
	}
}

// links reads each pod's net1 as `ip -o link` shows it: ifindex and MAC.
func (u *upgrade) links() map[string]string {
	u.t.Helper()
	out := map[string]string{}
	for pod := range u.addr {
		line, _, err := testbed.Exec(testbed.Context(u.t, time.Minute), u.e.Rest, u.ns, pod, "main", "ip", "-o", "link", "show", "dev", "net1")
		if err != nil {
			u.t.Fatalf("net1 of %s: %v", pod, err)
		}
		index, _, _ := strings.Cut(line, ":")
		mac := regexp.MustCompile(`link/ether ([0-9a-f:]+)`).FindStringSubmatch(line)
		if mac == nil {
			u.t.Fatalf("net1 of %s: no MAC in %q", pod, line)
		}
		out[pod] = "ifindex " + index + ", MAC " + mac[1]
	}
	return out
}

func (u *upgrade) sameLinks(before map[string]string, when string) {
	u.t.Helper()
	for pod, now := range u.links() {
		if now != before[pod] {
			u.t.Errorf("%s: net1 of %s is %s, was %s: the attachment was made again", when, pod, now, before[pod])
		}
	}
}

// rolledTo waits until the netclass-dra DaemonSet runs image on every node, Ready.
func (u *upgrade) rolledTo(image string) {
	u.t.Helper()
	testbed.Poll(u.t, testbed.Context(u.t, upgradeTimeout), 500*time.Millisecond, "netclass-dra rolled to "+image,
		func(ctx context.Context) (bool, string, error) {
			ds, err := u.e.Kube.AppsV1().DaemonSets(namespace).Get(ctx, "netclass-dra", metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			return rolled(ds, image), fmt.Sprintf("%+v", ds.Status), nil
		})
	for _, n := range u.e.Nodes {
		readyz(u.t, n, "http://127.0.0.1:9810/readyz")
	}
}

func rolled(ds *appsv1.DaemonSet, image string) bool {
	s := ds.Status
	return ds.Spec.Template.Spec.Containers[0].Image == image && s.ObservedGeneration == ds.Generation &&
		s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberReady == s.DesiredNumberScheduled &&
		s.NumberUnavailable == 0
}

// ping pings addr from pod over net1 every 100 ms until the returned function is called,
// which stops it and returns how many pings were sent and answered.
func (u *upgrade) ping(pod, addr string) func() (sent, received int) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var out string
	wg.Go(func() {
		// -w bounds it should the test never stop it; SIGINT on cancel ends it with its summary
		out, _, _ = testbed.Exec(ctx, u.e.Rest, u.ns, pod, "main", "sh", "-c",
			"ping -i 0.1 -w 600 -I net1 "+addr+" & p=$!; while [ ! -e /tmp/stop ]; do sleep 0.2; done; kill -INT $p; wait $p")
	})
	return func() (int, int) {
		_, _, err := testbed.Exec(testbed.Context(u.t, time.Minute), u.e.Rest, u.ns, pod, "main", "touch", "/tmp/stop")
		wg.Wait()
		cancel()
		if err != nil {
			u.t.Fatal(err)
		}
		m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) packets received`).FindStringSubmatch(out)
		if m == nil {
			u.t.Fatalf("no ping summary in %q", out)
		}
		sent, _ := strconv.Atoi(m[1])
		received, _ := strconv.Atoi(m[2])
		return sent, received
	}
}

// createServerPolicy lets only role=client into role=server, on TCP 80, on net1.
func createServerPolicy(t *testing.T, e *harness.Env, ns string) {
	t.Helper()
	pol := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server-from-client",
			Labels: map[string]string{contract.PolicyControllerLabel: contract.PolicyController}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "server"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(80))}},
			}},
		},
	}
	if _, err := e.Kube.NetworkingV1().NetworkPolicies(ns).Create(testbed.Context(t, time.Minute), pol, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkPolicy: %v", err)
	}
}

// checkoutOf makes a worktree of the repository at rev, removed when the test ends.
func checkoutOf(t *testing.T, rev string) string {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "release")
	if out, err := runOut(root, nil, "git", "worktree", "add", "--detach", dir, rev); err != nil {
		t.Fatalf("check out the previous release's commit %s (a shallow clone? it needs the history): %v\n%s", rev, err, out)
	}
	t.Cleanup(func() {
		if out, err := runOut(root, nil, "git", "worktree", "remove", "--force", dir); err != nil {
			t.Errorf("remove the worktree of %s: %v\n%s", rev, err, out)
		}
	})
	return dir
}

func releaseScript(t *testing.T) string {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "scripts", "testbed", "deploy.sh")
}
