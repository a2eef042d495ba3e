//go:build testbed

package deploy

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/repo"
	"github.com/netclass-dev/netclass/test/testbed"
)

// namespace is conf/deploy's namespace. It is never deleted: tests of other
// packages keep their leader Leases there.
const namespace = "netclass-system"

// rolloutTimeout bounds how long the workloads take to run.
const rolloutTimeout = 3 * time.Minute

// deploy applies every manifest of conf/deploy (not its examples), adapted
// to the test bed by adapt, waits until the DaemonSet and the Deployment
// run, and removes what it created when the test ends, waiting for the
// workloads' pods to go.
func deploy(t *testing.T, e *harness.Env, adapt func(*unstructured.Unstructured) error) {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "conf", "deploy", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in conf/deploy: %v", err)
	}
	ctx := testbed.Context(t, time.Minute)
	var created []harness.Applied
	t.Cleanup(func() { undeploy(t, e, created) })
	t.Cleanup(func() { // before undeploy: the workloads still run
		if t.Failed() {
			t.Log(workloadPods(e))
		}
	})
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		objs, err := e.ApplyFile(ctx, rel, adapt)
		for _, o := range objs {
			if o.Kind != "Namespace" {
				created = append(created, o)
			}
		}
		if err != nil {
			t.Fatalf("apply %s: %v", rel, err)
		}
	}
	waitRollout(t, e)
}

// waitRollout waits until every pod of the DaemonSet and the Deployment is
// ready.
func waitRollout(t *testing.T, e *harness.Env) {
	t.Helper()
	ctx := testbed.Context(t, rolloutTimeout)
	apps := e.Kube.AppsV1()
	testbed.Poll(t, ctx, time.Second, "netclass-dra and netclass-controller running", func(ctx context.Context) (bool, string, error) {
		ds, err := apps.DaemonSets(namespace).Get(ctx, "netclass-dra", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		dep, err := apps.Deployments(namespace).Get(ctx, "netclass-controller", metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		note := fmt.Sprintf("DaemonSet %d/%d ready, Deployment %d/%d available", ds.Status.NumberReady, ds.Status.DesiredNumberScheduled,
			dep.Status.AvailableReplicas, replicas(dep))
		ok := ds.Status.DesiredNumberScheduled > 0 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled &&
			ds.Status.ObservedGeneration == ds.Generation && dep.Status.AvailableReplicas == replicas(dep)
		return ok, note, nil
	})
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// workloadPods describes the pods of conf/deploy's workloads: phase,
// container states and the last lines of their logs.
func workloadPods(e *harness.Env) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := e.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=netclass"})
	if err != nil {
		return fmt.Sprintf("list the workloads' pods: %v", err)
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s: %s\n", p.Name, p.Status.Phase)
		for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, "  %s ready=%v restarts=%d state=%+v last=%+v\n", s.Name, s.Ready, s.RestartCount, s.State, s.LastTerminationState)
			logs, err := testbed.Logs(ctx, e.Kube, namespace, p.Name, s.Name)
			if err != nil {
				fmt.Fprintf(&b, "  (no logs: %v)\n", err)
				continue
			}
			lines := strings.Split(strings.TrimSpace(logs), "\n")
			fmt.Fprintf(&b, "  %s\n", strings.Join(lines[max(0, len(lines)-15):], "\n  "))
		}
		fmt.Fprintf(&b, "  events: %s\n", testbed.Events(ctx, e.Kube, namespace, p.Name))
	}
	return b.String()
}

// undeploy deletes what deploy created and waits until the workloads' pods
// are gone (netclass-dra stopped), then removes the slices it left.
func undeploy(t *testing.T, e *harness.Env, created []harness.Applied) {
	if err := harness.DeleteApplied(created); err != nil {
		t.Errorf("remove the deployment: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		pods, err := e.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/part-of=netclass"})
		if err == nil && len(pods.Items) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Errorf("the workloads' pods did not go: %v", err)
			return
		case <-time.After(500 * time.Millisecond): // polling the API server: the pods' deletion has no event here
		}
	}
	slices, err := e.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.driver=netclass.dev,spec.nodeName=" + e.Node})
	if err != nil {
		t.Errorf("list the slices netclass-dra left: %v", err)
		return
	}
	for _, s := range slices.Items {
		if err := e.Kube.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ResourceSlice %s: %v", s.Name, err)
		}
	}
}

// testbedAdapter returns the changes this test bed needs, and only those:
//   - it runs no kube-proxy, so the workloads reach the API server at its
//     own address (the controller on the host network for that), as its
//     notes say;
//   - its containerd mounts pod network namespaces under its state
//     directory, which netclass-dra's netns volume must show;
//   - on one node's host network, two controller replicas would both bind
//     the probe port: one replica runs.
func testbedAdapter(apiServer string, n node) (func(*unstructured.Unstructured) error, error) {
	u, err := url.Parse(apiServer)
	if err != nil || u.Hostname() == "" || u.Port() == "" {
		return nil, fmt.Errorf("API server address %q has no host and port: %v", apiServer, err)
	}
	env := []corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: u.Hostname()}, {Name: "KUBERNETES_SERVICE_PORT", Value: u.Port()}}
	return func(obj *unstructured.Unstructured) error {
		switch obj.GetKind() {
		case "DaemonSet", "Deployment":
		default:
			return nil
		}
		var spec corev1.PodSpec
		raw, _, err := unstructured.NestedMap(obj.Object, "spec", "template", "spec")
		if err != nil {
			return err
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &spec); err != nil {
			return err
		}
		for i := range spec.Containers {
			spec.Containers[i].Env = append(spec.Containers[i].Env, env...)
		}
		if obj.GetKind() == "Deployment" {
			spec.HostNetwork, spec.DNSPolicy = true, corev1.DNSClusterFirstWithHostNet
			if err := unstructured.SetNestedField(obj.Object, int64(1), "spec", "replicas"); err != nil {
				return err
			}
		}
		if err := netnsAt(&spec, n.netnsDir); err != nil && obj.GetKind() == "DaemonSet" {
			return err
		}
		out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
		if err != nil {
			return err
		}
		return unstructured.SetNestedMap(obj.Object, out, "spec", "template", "spec")
	}, nil
}

// netnsAt points the volume named netns, and its mounts, at dir.
func netnsAt(spec *corev1.PodSpec, dir string) error {
	found := false
	for i := range spec.Volumes {
		if v := &spec.Volumes[i]; v.Name == "netns" && v.HostPath != nil {
			v.HostPath.Path, found = dir, true
		}
	}
	if !found {
		return fmt.Errorf("no hostPath volume named netns")
	}
	for i := range spec.Containers {
		for j := range spec.Containers[i].VolumeMounts {
			if m := &spec.Containers[i].VolumeMounts[j]; m.Name == "netns" {
				m.MountPath = dir
			}
		}
	}
	return nil
}
