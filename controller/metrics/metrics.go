// Package metrics defines netclass-controller's Prometheus metrics, every
// series named netclass_controller_*: per reconciler (label controller) the
// reconciles by result, their duration and the workqueue's depth, latency,
// work duration, retries and stuck work; and whether this instance leads.
//
// A Queue's metrics live with its workqueue from the moment it is built (so
// nothing added before the registry is known is lost) and are registered
// while the queue runs, on the registry the context carries (WithRegisterer):
// the reconcilers are built by their packages and only their Run sees the
// manager's context. There is no global registry.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// Results of a reconcile.
const (
	Success = "success"
	Error   = "error"
	// Conflict: the write raced with another (the cache was behind); retried at once.
	Conflict = "conflict"
)

// Buckets of the duration histograms: a cached reconcile takes about a
// millisecond, one that writes waits for the API server.
var buckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Queue is the metrics of one reconciler and its workqueue. It is the
// workqueue's MetricsProvider and a prometheus.Collector.
type Queue struct {
	reconciles *prometheus.CounterVec
	duration   prometheus.Histogram
	depth      prometheus.Gauge
	adds       prometheus.Counter
	latency    prometheus.Histogram
	work       prometheus.Histogram
	unfinished prometheus.Gauge
	longest    prometheus.Gauge
	retries    prometheus.Counter
}

// NewQueue returns the metrics of the reconciler called name.
func NewQueue(name string) *Queue {
	l := prometheus.Labels{"controller": name}
	gauge := func(n, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: n, Help: help, ConstLabels: l})
	}
	counter := func(n, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: n, Help: help, ConstLabels: l})
	}
	histogram := func(n, help string) prometheus.Histogram {
		return prometheus.NewHistogram(prometheus.HistogramOpts{Name: n, Help: help, ConstLabels: l, Buckets: buckets})
	}
	return &Queue{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "netclass_controller_reconciles_total", Help: "Reconciles, by reconciler and result.", ConstLabels: l,
		}, []string{"result"}),
		duration:   histogram("netclass_controller_reconcile_duration_seconds", "Duration of a reconcile, by reconciler."),
		depth:      gauge("netclass_controller_workqueue_depth", "Keys waiting in the reconciler's workqueue."),
		adds:       counter("netclass_controller_workqueue_adds_total", "Keys added to the reconciler's workqueue."),
		latency:    histogram("netclass_controller_workqueue_queue_duration_seconds", "How long a key waits in the workqueue before a worker takes it."),
		work:       histogram("netclass_controller_workqueue_work_duration_seconds", "How long a worker holds a key (the reconcile and its bookkeeping)."),
		unfinished: gauge("netclass_controller_workqueue_unfinished_work_seconds", "Seconds of work in progress that has not finished yet (stuck workers make it grow)."),
		longest:    gauge("netclass_controller_workqueue_longest_running_processor_seconds", "How long the longest running worker of the queue has held its key."),
		retries:    counter("netclass_controller_workqueue_retries_total", "Keys put back with a rate-limited delay after a failed reconcile."),
	}
}

func (q *Queue) collectors() []prometheus.Collector {
	return []prometheus.Collector{q.reconciles, q.duration, q.depth, q.adds, q.latency, q.work, q.unfinished, q.longest, q.retries}
}

// Describe implements prometheus.Collector.
func (q *Queue) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range q.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (q *Queue) Collect(ch chan<- prometheus.Metric) {
	for _, c := range q.collectors() {
		c.Collect(ch)
	}
}

// ObserveReconcile records one reconcile.
func (q *Queue) ObserveReconcile(result string, took time.Duration) {
	q.reconciles.WithLabelValues(result).Inc()
	q.duration.Observe(took.Seconds())
}

// The workqueue.MetricsProvider methods: the queue asks once for each.

func (q *Queue) NewDepthMetric(string) workqueue.GaugeMetric       { return q.depth }
func (q *Queue) NewAddsMetric(string) workqueue.CounterMetric      { return q.adds }
func (q *Queue) NewLatencyMetric(string) workqueue.HistogramMetric { return q.latency }
func (q *Queue) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return q.work
}
func (q *Queue) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return q.unfinished
}
func (q *Queue) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return q.longest
}
func (q *Queue) NewRetriesMetric(string) workqueue.CounterMetric { return q.retries }

var _ workqueue.MetricsProvider = (*Queue)(nil)

// Manager is the metrics of the controller process itself.
type Manager struct {
	leader prometheus.Gauge
}

// NewManager creates the process's metrics and registers them on reg.
func NewManager(reg prometheus.Registerer) (*Manager, error) {
	m := &Manager{leader: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "netclass_controller_leader",
		Help: "1 while this instance runs the reconcilers (holds the leader Lease, or leader election is off), else 0.",
	})}
	if err := reg.Register(m.leader); err != nil {
		return nil, err
	}
	return m, nil
}

// SetLeader records whether this instance runs the reconcilers.
func (m *Manager) SetLeader(leading bool) {
	if m == nil {
		return
	}
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}

type registererKey struct{}

// WithRegisterer returns ctx carrying reg: queues that run under it
// register their metrics there.
func WithRegisterer(ctx context.Context, reg prometheus.Registerer) context.Context {
	return context.WithValue(ctx, registererKey{}, reg)
}

// Registerer is the registry ctx carries (nil: none).
func Registerer(ctx context.Context) prometheus.Registerer {
	reg, _ := ctx.Value(registererKey{}).(prometheus.Registerer)
	return reg
}
