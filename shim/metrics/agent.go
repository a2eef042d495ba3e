package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/netclass-dev/netclass/shim/ruleagent"
)

// Agent holds the metrics of the agent that keeps running attachments'
// QoS and NetworkPolicy rules current (shim/ruleagent). A nil *Agent
// records nothing.
type Agent struct {
	syncs       *prometheus.HistogramVec
	attachments *prometheus.GaugeVec
	notEnforced prometheus.Gauge
	updates     *prometheus.CounterVec
}

// Label values of the agent's metrics.
const (
	Held   = "held"
	Failed = "failed"
	QoS    = "qos"
	Policy = "policy"
)

// NewAgent creates the agent's metrics and registers them on reg.
func NewAgent(reg prometheus.Registerer) (*Agent, error) {
	m := &Agent{
		syncs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "netclass_agent_sync_duration_seconds",
			Help:    "Duration of the agent's syncs of every running attachment's rules; result is error when any attachment does not hold its rules.",
			Buckets: buckets,
		}, []string{"result"}),
		attachments: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "netclass_agent_attachments",
			Help: "Running attachments after the last sync, by state: held (their rules are what the objects say) or failed.",
		}, []string{"state"}),
		notEnforced: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "netclass_agent_policy_rules_not_enforced",
			Help: "Attachments some NetworkPolicy rule of which is left out after the last sync (Events NotEnforced say which).",
		}),
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "netclass_agent_rule_updates_total",
			Help: "Attachments whose rules a sync changed in the kernel, by kind (qos, policy).",
		}, []string{"kind"}),
	}
	for _, c := range []prometheus.Collector{m.syncs, m.attachments, m.notEnforced, m.updates} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveSync records one sync and what it left.
func (m *Agent) ObserveSync(took time.Duration, outs []ruleagent.Outcome) {
	if m == nil {
		return
	}
	m.syncs.WithLabelValues(ResultOf(ruleagent.Errors(outs))).Observe(took.Seconds())
	var held, failed, notEnforced int
	for _, o := range outs {
		switch {
		case o.Err != nil:
			failed++
		default:
			held++
		}
		if o.PolicyIgnored != nil {
			notEnforced++
		}
		if o.Changed {
			m.updates.WithLabelValues(QoS).Inc()
		}
		if o.PolicyChanged {
			m.updates.WithLabelValues(Policy).Inc()
		}
	}
	m.attachments.WithLabelValues(Held).Set(float64(held))
	m.attachments.WithLabelValues(Failed).Set(float64(failed))
	m.notEnforced.Set(float64(notEnforced))
}
