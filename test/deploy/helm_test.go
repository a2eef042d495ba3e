//go:build testbed

package deploy

import (
	"bytes"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/repo"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// The chart of conf/helm/netclass, installed with helm as an operator would
// (values only for what this test bed lacks, the same as deploy.sh's adapt),
// runs netclass on every node: two pods with claims get net1 and reach each
// other, and the daemons serve their metrics; helm uninstall takes it away.
func TestHelmInstallAttachesPods(t *testing.T) {
	e := harness.Bare(t)
	installChart(t, e)

	n1 := e.Nodes[0]
	net := e.BridgeNet(t, "helm", "net")
	ns, pn := net.Namespace, net.PodNetwork
	e.WaitPodNetworkCondition(t, pn, "Ready", metav1.ConditionTrue)
	before := mustScrape(t, n1, draMetrics)
	// a bridge is node-local: both pods on node 1
	e.RunPods(t, harness.PodOn(n1.Name, ns, "a", "net"), harness.PodOn(n1.Name, ns, "b", "net"))
	a, b := e.Attached(t, ns, "a", "net", "net1"), e.Attached(t, ns, "b", "net", "net1")
	e.Ping(t, ns, "a", "net1", harness.Addr(t, b))
	e.Ping(t, ns, "b", "net1", harness.Addr(t, a))
	e.WaitPodNetworkCondition(t, pn, "InUse", metav1.ConditionTrue)
	checkMetricsAfterTwoPods(t, e, n1, before, pn)
}

// installChart installs the chart of conf/helm/netclass with helm as an operator would
// (values only for what this test bed lacks, the same as deploy.sh's adapt), running the
// image built from this tree, and waits for netclass-dra to serve on every node; helm
// uninstall takes it away when the test ends.
func installChart(t *testing.T, e *harness.Env) *helmRelease {
	t.Helper()
	return installChartWith(t, e, "latest")
}

// helmRelease runs helm on the release installChartWith made.
type helmRelease struct {
	run    func(args ...string) error
	values string
}

// installChartWith is installChart with the image tag to run, and more image archives to
// import into every node first (the image of this tree, tagged latest, is always there).
func installChartWith(t *testing.T, e *harness.Env, tag string, images ...string) *helmRelease {
	t.Helper()
	helm := helmBinary(t)
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "testbed", "deploy.sh")
	hostFiles(t, e.Nodes, append(pluginPaths(t), "/var/lib/netclass")...)
	t.Cleanup(func() { // after helm uninstall: waits for the pods, removes the slices and the image
		if out, err := runOut("", nil, "bash", script, "release", Image); err != nil {
			t.Errorf("deploy.sh release: %v\n%s", err, out)
		}
	})
	for _, tar := range append([]string{buildImage(t)}, images...) {
		run(t, "", nil, "bash", script, "import", tar)
	}
	kubeconfig := testbed.Kubeconfig(t)
	h := &helmRelease{values: testbedValues(t, e.Rest.Host)}
	h.run = func(args ...string) error {
		cmd := exec.Command(helm, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
		}
		return nil
	}
	t.Cleanup(func() {
		if err := h.run("uninstall", "netclass", "--namespace", namespace); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(workloadPods(e.Kube))
		}
	})
	if err := h.run("install", "netclass", "conf/helm/netclass", "--namespace", namespace, "--create-namespace",
		"-f", h.values, "--set", "image.tag="+tag); err != nil {
		t.Fatal(err)
	}
	run(t, "", nil, "bash", script, "wait")
	draPods(t, e)
	for _, n := range e.Nodes {
		readyz(t, n, "http://127.0.0.1:9810/readyz")
	}
	return h
}

// helmBinary is the helm of `make` ($NETCLASS_HELM), else the newest one
// make built under .cache/tools.
func helmBinary(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("NETCLASS_HELM"); h != "" {
		if _, err := os.Stat(h); err != nil {
			t.Fatalf("NETCLASS_HELM: %v (make builds it: make test-helm)", err)
		}
		return h
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	found, _ := filepath.Glob(filepath.Join(root, ".cache", "tools", "helm-v*"))
	if len(found) == 0 {
		t.Fatal("no helm: run `make test-helm` once (it builds the pinned version), or set NETCLASS_HELM")
	}
	return found[len(found)-1]
}

// testbedValues writes the chart values this test bed needs, the changes
// scripts/testbed/deploy.sh makes to conf/deploy: the API server's own address
// (no kube-proxy), the controller on the host network (one replica: the port
// is the node's), the runtime's network namespaces under its state directory.
func testbedValues(t *testing.T, apiServer string) string {
	t.Helper()
	u, err := url.Parse(apiServer)
	if err != nil || u.Hostname() == "" || u.Port() == "" {
		t.Fatalf("API server address %q has no host and port: %v", apiServer, err)
	}
	values := map[string]any{
		"apiServer":  map[string]any{"host": u.Hostname(), "port": u.Port()},
		"controller": map[string]any{"hostNetwork": true, "replicas": 1},
		"dra":        map[string]any{"netnsDir": filepath.Join(bed.StateDir(), "containerd", "io.containerd.grpc.v1.cri", "netns")},
	}
	raw, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "testbed-values.yaml")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
