// Package qos holds the `qos` block that every netclass plugin accepts: its
// types, validation with field paths, merging of runtime overrides, and
// compilation into a Plan the data-plane packages apply. Everything here is
// pure: no syscalls, no netlink.
package qos

// Spec is the `qos` block of a plugin configuration (README.md, "The qos block").
//
// Rates and bursts of the attachment follow the upstream bandwidth plugin:
// rates in bits per second, bursts in bits. Rule bandwidth follows NetworkQoS:
// rate in kbps, burst in kilobits.
type Spec struct {
	IngressRate  int64  `json:"ingressRate,omitempty"`
	IngressBurst int64  `json:"ingressBurst,omitempty"`
	EgressRate   int64  `json:"egressRate,omitempty"`
	EgressBurst  int64  `json:"egressBurst,omitempty"`
	DSCP         *int   `json:"dscp,omitempty"`
	Egress       []Rule `json:"egress,omitempty"`
	// Queue is the queue under the shapers (Queue*; "" is DefaultQueue).
	// Alone it asks for nothing: it shapes nothing by itself.
	Queue string `json:"queue,omitempty"`
	// Policy is the admin's DSCP policy the attachment is under (nil:
	// none). It is never read from JSON: netconf sets it from the
	// configuration's top-level dscpPolicy, the rule agent from the
	// network, so the pod's side cannot set it.
	Policy *DSCPPolicy `json:"-"`
}

// Rule is one egress rule: packets matching Classifier are marked with DSCP
// and metered by Bandwidth (the excess is dropped).
type Rule struct {
	Priority   int        `json:"priority"`
	DSCP       *int       `json:"dscp,omitempty"`
	Classifier Classifier `json:"classifier"`
	Bandwidth  *Bandwidth `json:"bandwidth,omitempty"`
}

// Classifier selects packets by destination and transport port. An empty list
// matches everything.
type Classifier struct {
	To    []Peer `json:"to,omitempty"`
	Ports []Port `json:"ports,omitempty"`
}

// Peer is a destination. Only ipBlock reaches a plugin: pod and namespace
// selectors of a NetworkQoS are resolved to addresses before.
type Peer struct {
	IPBlock *IPBlock `json:"ipBlock,omitempty"`
}

// IPBlock is a CIDR minus exceptions, as in NetworkPolicy.
type IPBlock struct {
	CIDR   string   `json:"cidr"`
	Except []string `json:"except,omitempty"`
}

// Port is a transport protocol and an optional destination port.
type Port struct {
	Protocol string `json:"protocol"`
	Port     *int   `json:"port,omitempty"`
}

// Bandwidth meters matching packets: rate in kbps, burst in kilobits.
type Bandwidth struct {
	Rate  int64 `json:"rate"`
	Burst int64 `json:"burst,omitempty"`
}

// RuntimeBandwidth is kubelet's `runtimeConfig.bandwidth` capability (bits/s, bits).
type RuntimeBandwidth struct {
	IngressRate  int64 `json:"ingressRate,omitempty"`
	IngressBurst int64 `json:"ingressBurst,omitempty"`
	EgressRate   int64 `json:"egressRate,omitempty"`
	EgressBurst  int64 `json:"egressBurst,omitempty"`
}

// IsZero reports whether the spec asks for nothing.
func (s *Spec) IsZero() bool {
	return s == nil || (s.IngressRate == 0 && s.IngressBurst == 0 && s.EgressRate == 0 &&
		s.EgressBurst == 0 && s.DSCP == nil && len(s.Egress) == 0 && s.Policy == nil)
}

// Merge returns base with every field that over sets replacing it: the rule
// list is replaced as a whole, never concatenated. nil inputs are allowed.
func Merge(base, over *Spec) *Spec {
	if over == nil {
		return clone(base)
	}
	out := clone(base)
	if out == nil {
		out = &Spec{}
	}
	if over.IngressRate != 0 || over.IngressBurst != 0 {
		out.IngressRate, out.IngressBurst = over.IngressRate, over.IngressBurst
	}
	if over.EgressRate != 0 || over.EgressBurst != 0 {
		out.EgressRate, out.EgressBurst = over.EgressRate, over.EgressBurst
	}
	if over.DSCP != nil {
		v := *over.DSCP
		out.DSCP = &v
	}
	if over.Egress != nil {
		out.Egress = make([]Rule, len(over.Egress))
		copy(out.Egress, over.Egress)
	}
	if over.Queue != "" {
		out.Queue = over.Queue
	}
	return out
}

// WithBandwidth merges kubelet's bandwidth capability over the spec, the way
// the upstream bandwidth plugin lets runtimeConfig win over static limits.
func WithBandwidth(s *Spec, bw *RuntimeBandwidth) *Spec {
	if bw == nil {
		return clone(s)
	}
	return Merge(s, &Spec{
		IngressRate: bw.IngressRate, IngressBurst: bw.IngressBurst,
		EgressRate: bw.EgressRate, EgressBurst: bw.EgressBurst,
	})
}

func clone(s *Spec) *Spec {
	if s == nil {
		return nil
	}
	out := *s
	if s.DSCP != nil {
		v := *s.DSCP
		out.DSCP = &v
	}
	if s.Egress != nil {
		out.Egress = make([]Rule, len(s.Egress))
		copy(out.Egress, s.Egress)
	}
	return &out
}
