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
)

// The chart of conf/helm/netclass, installed with helm as an operator would
// (values only for what this test bed lacks, the same as testbedAdapter),
// runs netclass: two pods with claims get net1 and reach each other, and
// the daemons serve their metrics; helm uninstall takes it all away.
func TestHelmInstallAttachesPods(t *testing.T) {
	e := harness.Bare(t)
	bed := testbedNode(t)
	helm := helmBinary(t)
	importImage(t, bed, buildImage(t))
	hostFiles(t, append(pluginPaths(t), "/var/lib/netclass")...)
	values := testbedValues(t, e.Rest.Host, bed)
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := testbed.Kubeconfig(t)
	helmRun := func(args ...string) error {
		cmd := exec.Command(helm, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, out.String())
		}
		return nil
	}
	t.Cleanup(func() { undeploy(t, e, nil) }) // after helm uninstall: waits for the pods, removes the slices
	t.Cleanup(func() {
		if err := helmRun("uninstall", "netclass", "--namespace", namespace); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(workloadPods(e))
		}
	})
	if err := helmRun("install", "netclass", "conf/helm/netclass", "--namespace", namespace, "--create-namespace", "-f", values); err != nil {
		t.Fatal(err)
	}
	waitRollout(t, e)
	readyz(t, "http://127.0.0.1:9810/readyz")

	n := e.BridgeNet(t, "helm", "net")
	ns, pn := n.Namespace, n.PodNetwork
	e.WaitPodNetworkCondition(t, pn, "Ready", metav1.ConditionTrue)
	before := mustScrape(t, draMetrics)
	e.RunPods(t, harness.Pod(ns, "a", "net"), harness.Pod(ns, "b", "net"))
	a, b := e.Attached(t, ns, "a", "net", "net1"), e.Attached(t, ns, "b", "net", "net1")
	e.Ping(t, ns, "a", "net1", harness.Addr(t, b))
	e.Ping(t, ns, "b", "net1", harness.Addr(t, a))
	e.WaitPodNetworkCondition(t, pn, "InUse", metav1.ConditionTrue)
	checkMetricsAfterTwoPods(t, before, pn)
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
// testbedAdapter makes to conf/deploy: the API server's own address (no
// kube-proxy), the controller on the host network (one replica: the port is
// the node's), the runtime's network namespaces under its state directory.
func testbedValues(t *testing.T, apiServer string, n node) string {
	t.Helper()
	u, err := url.Parse(apiServer)
	if err != nil || u.Hostname() == "" || u.Port() == "" {
		t.Fatalf("API server address %q has no host and port: %v", apiServer, err)
	}
	values := map[string]any{
		"apiServer":  map[string]any{"host": u.Hostname(), "port": u.Port()},
		"controller": map[string]any{"hostNetwork": true, "replicas": 1},
		"dra":        map[string]any{"netnsDir": n.netnsDir},
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
