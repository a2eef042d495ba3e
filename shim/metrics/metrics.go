// Package metrics defines netclass-dra's Prometheus metrics, every series
// named netclass_*, on a registry the caller passes (no global registry), and
// the narrow decorators that feed them at the daemon's seams: the DRA kubelet
// plugin, the CNI runner, the ResourceSlice sink and the claim status writer
// (decorators.go); the NRI hooks report through nri.HookObserver, and the
// checkpoint is read at scrape time (checkpoint.go). Labels are bounded:
// operation, hook, verb, plugin type, result, and the network's name, never a
// pod or a claim.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Label values of result.
const (
	Success = "success"
	Error   = "error"
	// Skipped: an NRI hook for a sandbox without netclass attachments.
	Skipped = "skipped"
)

// Operations of the DRA kubelet plugin.
const (
	Prepare   = "prepare"
	Unprepare = "unprepare"
)

// Buckets of every latency histogram: from 1 ms (a checkpoint-only Prepare)
// to NRI's 2 s budget and beyond (status writes under API server load).
var buckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10}

// DRA holds netclass-dra's metrics. A nil *DRA records nothing.
type DRA struct {
	claims        *prometheus.CounterVec
	requests      *prometheus.HistogramVec
	hooks         *prometheus.CounterVec
	hookLatency   *prometheus.HistogramVec
	cniExecs      *prometheus.CounterVec
	cniLatency    *prometheus.HistogramVec
	devices       prometheus.Gauge
	publications  *prometheus.CounterVec
	statusWrites  *prometheus.CounterVec
	statusLatency *prometheus.HistogramVec
	setAside      prometheus.Gauge
}

// NewDRA creates netclass-dra's metrics and registers them on reg.
func NewDRA(reg prometheus.Registerer) (*DRA, error) {
	m := &DRA{
		claims: counter("netclass_dra_claims_total",
			"ResourceClaims the kubelet asked netclass-dra to prepare or unprepare, by outcome (one per claim of a request).", "operation", "result"),
		requests: histogram("netclass_dra_request_duration_seconds",
			"Duration of the kubelet's NodePrepareResources and NodeUnprepareResources calls; result is error when any claim failed.", "operation", "result"),
		hooks: counter("netclass_nri_hooks_total",
			"NRI hooks netclass-dra answered, by hook and outcome (skipped: the sandbox has no netclass attachment).", "hook", "result"),
		hookLatency: histogram("netclass_nri_hook_duration_seconds",
			"Time netclass-dra took to answer an NRI hook, by hook and outcome.", "hook", "result"),
		cniExecs: counter("netclass_cni_execs_total",
			"CNI configuration lists executed, by main plugin type, verb and outcome.", "plugin", "verb", "result"),
		cniLatency: histogram("netclass_cni_exec_duration_seconds",
			"Duration of a CNI configuration list execution (every plugin of the chain), by main plugin type, verb and outcome.", "plugin", "verb", "result"),
		devices: prometheus.NewGauge(prometheus.GaugeOpts{Name: "netclass_published_devices",
			Help: "Devices in this node's netclass.dev ResourceSlices after the last successful publication."}),
		publications: counter("netclass_publications_total", "Publications of this node's ResourceSlices, by outcome.", "result"),
		statusWrites: counter("netclass_status_writes_total",
			"ResourceClaim status writes (status.devices entries of netclass.dev), by outcome after retries.", "result"),
		statusLatency: histogram("netclass_status_write_duration_seconds",
			"Duration of a ResourceClaim status write, retries included, by outcome.", "result"),
		setAside: prometheus.NewGauge(prometheus.GaugeOpts{Name: "netclass_checkpoint_set_aside_records",
			Help: "Checkpoint records set aside at start (undecodable or of an unknown version, renamed *.corrupt); CNI GC stays off while it is not 0."}),
	}
	for _, c := range []prometheus.Collector{m.claims, m.requests, m.hooks, m.hookLatency, m.cniExecs, m.cniLatency,
		m.devices, m.publications, m.statusWrites, m.statusLatency, m.setAside} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// histogram has the package's buckets.
func histogram(name, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

// ResultOf is the result label of an error.
func ResultOf(err error) string {
	if err != nil {
		return Error
	}
	return Success
}

// ObserveHook records one NRI hook (nri.HookObserver).
func (m *DRA) ObserveHook(hook, result string, took time.Duration) {
	if m == nil {
		return
	}
	m.hooks.WithLabelValues(hook, result).Inc()
	m.hookLatency.WithLabelValues(hook, result).Observe(took.Seconds())
}

// SetAside records how many checkpoint records were set aside at start.
func (m *DRA) SetAside(n int) {
	if m == nil {
		return
	}
	m.setAside.Set(float64(n))
}

func (m *DRA) observeClaims(op string, results map[string]int, call error, took time.Duration) {
	for result, n := range results {
		m.claims.WithLabelValues(op, result).Add(float64(n))
	}
	overall := ResultOf(call)
	if results[Error] > 0 {
		overall = Error
	}
	m.requests.WithLabelValues(op, overall).Observe(took.Seconds())
}

func (m *DRA) observeCNI(plugin, verb string, err error, took time.Duration) {
	r := ResultOf(err)
	m.cniExecs.WithLabelValues(plugin, verb, r).Inc()
	m.cniLatency.WithLabelValues(plugin, verb, r).Observe(took.Seconds())
}

func (m *DRA) observePublication(devices int, err error) {
	m.publications.WithLabelValues(ResultOf(err)).Inc()
	if err == nil {
		m.devices.Set(float64(devices))
	}
}

func (m *DRA) observeStatus(err error, took time.Duration) {
	r := ResultOf(err)
	m.statusWrites.WithLabelValues(r).Inc()
	m.statusLatency.WithLabelValues(r).Observe(took.Seconds())
}
