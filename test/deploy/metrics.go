//go:build testbed

package deploy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/netclass-dev/netclass/test/e2e/harness"
	"github.com/netclass-dev/netclass/test/testbed"
	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// Where the workloads of conf/deploy serve /metrics, on the network of the
// node they run on: netclass-dra on the host network (--metrics-address=:9811),
// the controller on the host network too (the test bed's adaptation).
const (
	draMetrics        = "http://127.0.0.1:9811/metrics"
	controllerMetrics = "http://127.0.0.1:9812/metrics"
)

// The series README.md documents for each daemon; each must be served once
// two pods attached (the unprepare and GC ones too: their families exist
// from the first prepare and ADD on).
var (
	draSeries = []string{
		"netclass_dra_claims_total", "netclass_dra_request_duration_seconds",
		"netclass_nri_hooks_total", "netclass_nri_hook_duration_seconds",
		"netclass_cni_execs_total", "netclass_cni_exec_duration_seconds",
		"netclass_published_devices", "netclass_publications_total",
		"netclass_status_writes_total", "netclass_status_write_duration_seconds",
		"netclass_checkpoint_records", "netclass_checkpoint_set_aside_records", "netclass_attachments",
	}
	controllerSeries = []string{
		"netclass_controller_leader", "netclass_controller_reconciles_total", "netclass_controller_reconcile_duration_seconds",
		"netclass_controller_workqueue_depth", "netclass_controller_workqueue_adds_total",
		"netclass_controller_workqueue_queue_duration_seconds", "netclass_controller_workqueue_work_duration_seconds",
		"netclass_controller_workqueue_retries_total", "netclass_controller_workqueue_unfinished_work_seconds",
		"netclass_controller_workqueue_longest_running_processor_seconds",
	}
)

// samples is one scrape: each counter or gauge sample (histograms by their
// count) under its name and sorted labels, name{k="v",...}.
type samples map[string]float64

// scrape reads url on node n (curl on the node's network: each node's daemon
// listens on its own).
func scrape(ctx context.Context, n bed.Node, url string) (samples, error) {
	body, err := n.Output(ctx, "curl", "-sf", "--max-time", "5", url)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", url, err)
	}
	out := samples{}
	for name, f := range families {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue // netclass-dra's Go runtime and process series (README "Metrics")
		}
		if !strings.HasPrefix(name, "netclass_") {
			return nil, fmt.Errorf("%s serves %s, not a netclass_* series", url, name)
		}
		out[name] = 0 // the family exists
		for _, m := range f.GetMetric() {
			out[sample(name, m.GetLabel())] = value(f.GetType(), m)
		}
	}
	return out, nil
}

func value(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

// sample is the key of a sample: name{k="v",...}, labels sorted.
func sample(name string, labels []*dto.LabelPair) string {
	l := make([]string, 0, len(labels))
	for _, p := range labels {
		l = append(l, fmt.Sprintf("%s=%q", p.GetName(), p.GetValue()))
	}
	sort.Strings(l)
	return name + "{" + strings.Join(l, ",") + "}"
}

// mustScrape scrapes url, failing the test on error.
func mustScrape(t *testing.T, n bed.Node, url string) samples {
	t.Helper()
	s, err := scrape(testbed.Context(t, 30*time.Second), n, url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// want is an expected change of a sample between two scrapes: exactly delta,
// or at least delta when atLeast.
type want struct {
	key     string
	delta   float64
	atLeast bool
}

// expectMetrics polls url until every want holds against before (a sample
// absent before counts as 0), and fails the test if they never all do.
func expectMetrics(t *testing.T, n bed.Node, url string, before samples, wants []want) {
	t.Helper()
	testbed.Poll(t, testbed.Context(t, time.Minute), 500*time.Millisecond, "metrics of "+url+" on "+n.Name, func(ctx context.Context) (bool, string, error) {
		now, err := scrape(ctx, n, url)
		if err != nil {
			return false, "", err
		}
		var wrong []string
		for _, w := range wants {
			got := now[w.key] - before[w.key]
			if got != w.delta && !(w.atLeast && got > w.delta) {
				wrong = append(wrong, fmt.Sprintf("%s changed by %v, want %v", w.key, got, w.delta))
			}
		}
		return len(wrong) == 0, strings.Join(wrong, "; "), nil
	})
}

// expectFamilies checks that a scrape serves every documented series.
func expectFamilies(t *testing.T, url string, s samples, families []string) {
	t.Helper()
	for _, f := range families {
		if _, ok := s[f]; !ok {
			t.Errorf("%s does not serve %s", url, f)
		}
	}
}

// checkMetricsAfterTwoPods checks, against a scrape of node n's netclass-dra
// taken before two pods started there with one claim each on PodNetwork
// network, that both claims were prepared, both sandboxes attached by NRI
// with one ADD each, both claims' status written, and the network holds two
// attachments; and that both daemons serve every documented series.
func checkMetricsAfterTwoPods(t *testing.T, e *harness.Env, n bed.Node, before samples, network string) {
	t.Helper()
	expectMetrics(t, n, draMetrics, before, []want{
		{key: `netclass_dra_claims_total{operation="prepare",result="success"}`, delta: 2},
		{key: `netclass_dra_claims_total{operation="prepare",result="error"}`, delta: 0},
		{key: `netclass_nri_hooks_total{hook="RunPodSandbox",result="success"}`, delta: 2},
		{key: `netclass_nri_hooks_total{hook="RunPodSandbox",result="error"}`, delta: 0},
		{key: `netclass_cni_execs_total{plugin="netclass-bridge",result="success",verb="ADD"}`, delta: 2},
		{key: `netclass_status_writes_total{result="success"}`, delta: 2, atLeast: true},
		{key: `netclass_attachments{kind="PodNetwork",namespace="",network="` + network + `"}`, delta: 2},
	})
	s := mustScrape(t, n, draMetrics)
	expectFamilies(t, draMetrics, s, draSeries)
	if s["netclass_published_devices{}"] < 1 || s["netclass_checkpoint_records{}"] < 2 {
		t.Errorf("published devices %v, checkpoint records %v: want at least 1 and 2",
			s["netclass_published_devices{}"], s["netclass_checkpoint_records{}"])
	}
	c := mustScrape(t, controllerNode(t, e), controllerMetrics)
	expectFamilies(t, controllerMetrics, c, controllerSeries)
	if c["netclass_controller_leader{}"] != 1 || c[`netclass_controller_reconciles_total{controller="podnetwork",result="success"}`] < 1 {
		t.Errorf("controller: leader %v, successful PodNetwork reconciles %v",
			c["netclass_controller_leader{}"], c[`netclass_controller_reconciles_total{controller="podnetwork",result="success"}`])
	}
}

// controllerNode is the node the (one, host-network) controller replica runs on.
func controllerNode(t *testing.T, e *harness.Env) bed.Node {
	t.Helper()
	pods, err := e.Kube.CoreV1().Pods(namespace).List(testbed.Context(t, time.Minute),
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=netclass-controller"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, n := range e.Nodes {
			if p.Spec.NodeName == n.Name && p.DeletionTimestamp == nil {
				return n
			}
		}
	}
	t.Fatalf("no netclass-controller pod on a node of the test bed (%d pods)", len(pods.Items))
	return bed.Node{}
}
