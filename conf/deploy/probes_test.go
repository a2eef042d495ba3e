package deploy_test

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// flagValue is the value of --name=value in args ("" and false when absent).
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// portOf is the port of a host:port flag value.
func portOf(t *testing.T, addr string) int32 {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	var p int32
	if i < 0 {
		t.Fatalf("address %q has no port", addr)
	}
	if _, err := fmt.Sscan(addr[i+1:], &p); err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return p
}

func checkProbe(t *testing.T, what string, p *corev1.Probe, path string, port int32) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s: no HTTP probe", what)
		return
	}
	if p.HTTPGet.Path != path || p.HTTPGet.Port.IntVal != port {
		t.Errorf("%s probes %s on port %d, want %s on %d", what, p.HTTPGet.Path, p.HTTPGet.Port.IntVal, path, port)
	}
}

// Both workloads are probed on /healthz and /readyz where their
// --health-address serves them, and declare the port of their /metrics.
func TestProbesAndMetricsPorts(t *testing.T) {
	var ds *appsv1.DaemonSet
	var dep *appsv1.Deployment
	for _, o := range decodeAll(t, "*.yaml") {
		switch v := o.(type) {
		case *appsv1.DaemonSet:
			ds = v
		case *appsv1.Deployment:
			dep = v
		}
	}
	if ds == nil || dep == nil {
		t.Fatal("no DaemonSet or no Deployment")
	}
	for _, w := range []struct {
		name string
		c    corev1.Container
	}{{"netclass-dra", ds.Spec.Template.Spec.Containers[0]}, {"netclass-controller", dep.Spec.Template.Spec.Containers[0]}} {
		health, ok := flagValue(w.c.Args, "health-address")
		if !ok || health == "" {
			t.Errorf("%s: no --health-address", w.name)
			continue
		}
		checkProbe(t, w.name+" readiness", w.c.ReadinessProbe, "/readyz", portOf(t, health))
		checkProbe(t, w.name+" liveness", w.c.LivenessProbe, "/healthz", portOf(t, health))
		metrics, ok := flagValue(w.c.Args, "metrics-address")
		if !ok {
			metrics = health // the daemons' default: next to the probes
		}
		if metrics == "" || strings.HasPrefix(metrics, "127.") {
			t.Errorf("%s: /metrics at %q cannot be scraped", w.name, metrics)
			continue
		}
		declared := false
		for _, p := range w.c.Ports {
			declared = declared || (p.Name == "metrics" && p.ContainerPort == portOf(t, metrics))
		}
		if !declared {
			t.Errorf("%s: no port named metrics for %s", w.name, metrics)
		}
	}
}
