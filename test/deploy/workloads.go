//go:build testbed

package deploy

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/repo"
	"github.com/netclass-dev/netclass/test/testbed"
)

// namespace is conf/deploy's namespace. It is never deleted: tests of other
// packages keep their leader Leases there.
const namespace = "netclass-system"

// deploy installs netclass with the image archive the way `make
// testbed-deploy` does, through the same script (scripts/testbed/deploy.sh
// apply: the image into every node, conf/crd and conf/deploy applied with the
// test bed's only differences, until netclass-dra is Ready on every node and
// the controller runs), and removes it when the test ends (deploy.sh delete),
// describing the workloads' pods first when the test failed.
func deploy(t *testing.T, tar string) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "scripts", "testbed", "deploy.sh")
	t.Cleanup(func() {
		if out, err := runOut("", nil, "bash", script, "delete", Image); err != nil {
			t.Errorf("deploy.sh delete: %v\n%s", err, out)
		}
	})
	t.Cleanup(func() { // before the delete: the workloads still run
		if t.Failed() {
			t.Log(workloadPods(testbed.Client(t)))
		}
	})
	run(t, "", nil, "bash", script, "apply", tar)
}

// draPods checks, independently of the script, that netclass-dra's
// DaemonSet runs one Ready pod on every node of the test bed.
func draPods(t *testing.T, e *harness.Env) {
	t.Helper()
	pods, err := e.Kube.CoreV1().Pods(namespace).List(testbed.Context(t, time.Minute),
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=netclass-dra"})
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string]bool{}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready[p.Spec.NodeName] = true
			}
		}
	}
	for _, n := range e.Nodes {
		if !ready[n.Name] {
			t.Errorf("no Ready netclass-dra pod on node %s (Ready on %v)", n.Name, ready)
		}
	}
}

// workloadPods describes the pods of conf/deploy's workloads: node, phase,
// container states and the last lines of their logs.
func workloadPods(c kubernetes.Interface) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := c.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=netclass"})
	if err != nil {
		return fmt.Sprintf("list the workloads' pods: %v", err)
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s on %s: %s\n", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, "  %s ready=%v restarts=%d state=%+v last=%+v\n", s.Name, s.Ready, s.RestartCount, s.State, s.LastTerminationState)
			logs, err := testbed.Logs(ctx, c, namespace, p.Name, s.Name)
			if err != nil {
				fmt.Fprintf(&b, "  (no logs: %v)\n", err)
				continue
			}
			lines := strings.Split(strings.TrimSpace(logs), "\n")
			fmt.Fprintf(&b, "  %s\n", strings.Join(lines[max(0, len(lines)-15):], "\n  "))
		}
		fmt.Fprintf(&b, "  events: %s\n", testbed.Events(ctx, c, namespace, p.Name))
	}
	return b.String()
}
