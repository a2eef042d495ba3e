package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/netclass-dev/netclass/shim/checkpoint"
)

// Records lists the checkpoint's claim records (checkpoint.Store).
type Records interface {
	List() []*checkpoint.Claim
}

// Checkpoint is a collector that reads the checkpoint when scraped: the
// number of claim records, and the attachments in state Attached per
// network, so the series always say what the daemon would act on after a
// restart. Networks without attachments have no series.
type Checkpoint struct {
	records     Records
	recordsDesc *prometheus.Desc
	attachDesc  *prometheus.Desc
}

// NewCheckpoint returns the collector of records; register it next to NewDRA's metrics.
func NewCheckpoint(records Records) *Checkpoint {
	return &Checkpoint{
		records: records,
		recordsDesc: prometheus.NewDesc("netclass_checkpoint_records",
			"ResourceClaims prepared on this node: records in netclass-dra's checkpoint.", nil, nil),
		attachDesc: prometheus.NewDesc("netclass_attachments",
			"Pod interfaces attached (state Attached in the checkpoint), per network object: kind, namespace (empty for cluster-scoped kinds) and name.",
			[]string{"kind", "namespace", "network"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Checkpoint) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.recordsDesc
	ch <- c.attachDesc
}

// Collect implements prometheus.Collector.
func (c *Checkpoint) Collect(ch chan<- prometheus.Metric) {
	type key struct{ kind, namespace, name string }
	claims := c.records.List()
	attached := map[key]int{}
	for _, claim := range claims {
		for _, d := range claim.Devices {
			for _, a := range d.Attachments {
				if a.State == checkpoint.Attached {
					attached[key{d.Network.Kind, d.Network.Namespace, d.Network.Name}]++
				}
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(c.recordsDesc, prometheus.GaugeValue, float64(len(claims)))
	for k, n := range attached {
		ch <- prometheus.MustNewConstMetric(c.attachDesc, prometheus.GaugeValue, float64(n), k.kind, k.namespace, k.name)
	}
}
