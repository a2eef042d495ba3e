package testbed

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// NamespaceTimeout bounds how long the cleanup of Namespace waits for the namespace to go.
const NamespaceTimeout = 2 * time.Minute

// Namespace creates a throwaway namespace named after the test and deletes it when the test
// ends, waiting until it is gone (its pods stopped, their sandboxes torn down), so the next
// test starts on a clean node. A namespace that does not go in NamespaceTimeout fails the test.
func Namespace(t testing.TB, c kubernetes.Interface) string {
	t.Helper()
	ctx := Context(t, 30*time.Second)
	ns, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: namePrefix(t.Name()),
			Labels:       map[string]string{"netclass.dev/testbed": "true"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace for %s: %v", t.Name(), err)
	}
	name := ns.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), NamespaceTimeout)
		defer cancel()
		err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
			return
		}
		if err := waitGone(ctx, func(ctx context.Context) error {
			_, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
			return err
		}); err != nil {
			t.Errorf("namespace %s was not removed: %v", name, err)
		}
	})
	// Pods are refused until the namespace's default service account exists, and cannot start
	// before the root CA config map their token volume projects is there.
	Poll(t, ctx, 100*time.Millisecond, "namespace "+name+" ready for pods",
		func(ctx context.Context) (bool, string, error) {
			if _, err := c.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{}); err != nil {
				if apierrors.IsNotFound(err) {
					return false, "no default service account yet", nil
				}
				return false, "", fmt.Errorf("get service account %s/default: %w", name, err)
			}
			if _, err := c.CoreV1().ConfigMaps(name).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{}); err != nil {
				if apierrors.IsNotFound(err) {
					return false, "no kube-root-ca.crt config map yet", nil
				}
				return false, "", fmt.Errorf("get config map %s/kube-root-ca.crt: %w", name, err)
			}
			return true, "", nil
		})
	return name
}

// waitGone polls get until it reports "not found" or ctx ends.
func waitGone(ctx context.Context, get func(context.Context) error) error {
	ticker := time.NewTicker(250 * time.Millisecond)
	defer ticker.Stop()
	for {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
			}
			return fmt.Errorf("still there: %w", ctx.Err())
		case <-ticker.C:
		}
	}
}

// namePrefix turns a test name into a DNS label prefix for GenerateName.
func namePrefix(testName string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(testName) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	p := strings.Trim(b.String(), "-")
	if len(p) > 40 {
		p = strings.TrimRight(p[:40], "-")
	}
	if p == "" {
		p = "test"
	}
	return p + "-"
}

// Pod returns a pod running Image with the given command in one container named "main",
// imagePullPolicy Never, and a 1 s termination grace period. Callers adjust it before creating.
func Pod(namespace, name string, command ...string) *corev1.Pod {
	grace := int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           Image,
				ImagePullPolicy: corev1.PullNever,
				Command:         command,
			}},
		},
	}
}

// OnNode pins a pod to a node with a nodeSelector on the node's hostname label (the scheduler
// still runs, so DRA claims are allocated as for any pod), and returns it.
func OnNode(p *corev1.Pod, node string) *corev1.Pod {
	if p.Spec.NodeSelector == nil {
		p.Spec.NodeSelector = map[string]string{}
	}
	p.Spec.NodeSelector[HostnameLabel] = node
	return p
}

// WaitForPodRunning waits until every container of the pod runs and is ready, and returns the
// pod. It fails the test at once when the pod ends or a container cannot start (bad image,
// crash loop), and otherwise after timeout, quoting the pod's last state and events.
func WaitForPodRunning(t testing.TB, c kubernetes.Interface, namespace, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	ctx := Context(t, timeout)
	var pod *corev1.Pod
	Poll(t, ctx, 250*time.Millisecond, fmt.Sprintf("pod %s/%s running", namespace, name),
		func(ctx context.Context) (bool, string, error) {
			p, err := c.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, "", fmt.Errorf("get pod %s/%s: %w", namespace, name, err)
			}
			pod = p
			note := PodSummary(p)
			switch p.Status.Phase {
			case corev1.PodSucceeded, corev1.PodFailed:
				return false, note, fmt.Errorf("pod %s/%s ended: %s; events: %s", namespace, name, note, Events(ctx, c, namespace, name))
			}
			for _, cs := range p.Status.ContainerStatuses {
				if w := cs.State.Waiting; w != nil {
					switch w.Reason {
					case "ErrImageNeverPull", "InvalidImageName", "CrashLoopBackOff", "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
						return false, note, fmt.Errorf("container %s of pod %s/%s cannot start: %s: %s", cs.Name, namespace, name, w.Reason, w.Message)
					}
				}
			}
			if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
				return false, note + "; events: " + Events(ctx, c, namespace, name), nil
			}
			for _, cs := range p.Status.ContainerStatuses {
				if !cs.Ready || cs.State.Running == nil {
					return false, note, nil
				}
			}
			return true, note, nil
		})
	return pod
}

// PodSummary is a pod's phase, its conditions that are not True, and its
// containers that wait or ended, on one line.
func PodSummary(p *corev1.Pod) string {
	parts := []string{"phase " + string(p.Status.Phase)}
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue && cond.Message != "" {
			parts = append(parts, fmt.Sprintf("%s=%s (%s)", cond.Type, cond.Status, cond.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		switch {
		case cs.State.Waiting != nil:
			parts = append(parts, fmt.Sprintf("%s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
		case cs.State.Terminated != nil:
			parts = append(parts, fmt.Sprintf("%s terminated: %s exit %d", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode))
		}
	}
	return strings.Join(parts, "; ")
}

// Events returns the events of one object of the namespace, oldest first, on one line.
func Events(ctx context.Context, c kubernetes.Interface, namespace, name string) string {
	list, err := c.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name,
	})
	if err != nil {
		return fmt.Sprintf("(list events of %s/%s: %v)", namespace, name, err)
	}
	var parts []string
	for _, e := range list.Items {
		parts = append(parts, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, strings.TrimSpace(e.Message)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " | ")
}

// Exec runs command in a container of a running pod, the way `kubectl exec` does (API server
// → kubelet → containerd streaming), and returns its stdout and stderr. A command that exits
// non-zero returns an error carrying its exit status.
func Exec(ctx context.Context, cfg *rest.Config, namespace, pod, container string, command ...string) (string, string, error) {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", "", fmt.Errorf("create clientset: %w", err)
	}
	req := c.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{
		Container: container,
		Command:   command,
		Stdout:    true,
		Stderr:    true,
	}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return "", "", fmt.Errorf("exec in pod %s/%s: websocket executor: %w", namespace, pod, err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return "", "", fmt.Errorf("exec in pod %s/%s: spdy executor: %w", namespace, pod, err)
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return "", "", fmt.Errorf("exec in pod %s/%s: %w", namespace, pod, err)
	}
	var stdout, stderr bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		return stdout.String(), stderr.String(), fmt.Errorf("exec %q in pod %s/%s: %w", command, namespace, pod, err)
	}
	return stdout.String(), stderr.String(), nil
}

// Logs returns the log of a container of a pod.
func Logs(ctx context.Context, c kubernetes.Interface, namespace, pod, container string) (string, error) {
	rc, err := c.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Stream(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of pod %s/%s container %s: %w", namespace, pod, container, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return string(b), fmt.Errorf("read logs of pod %s/%s container %s: %w", namespace, pod, container, err)
	}
	return string(b), nil
}
