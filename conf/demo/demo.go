// Package demo is the scenario `make demo` runs: nodes, networks, pods and
// the checks to make with real traffic. The default scenario is embedded;
// another can be given as a file. Parsing and validation are pure.
package demo

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
)

//go:embed scenario.json
var defaultScenario []byte

// Default returns the embedded scenario.
func Default() []byte { return append([]byte(nil), defaultScenario...) }

// Scenario is what the demo builds and verifies.
type Scenario struct {
	Underlay []string  `json:"underlay"` // one CIDR address per node
	Nodes    []string  `json:"nodes"`
	Networks []Network `json:"networks"`
	Pods     []Pod     `json:"pods"`
	Checks   Checks    `json:"checks"`
}

// Network is one CNI network; plugin is a netclass plugin configuration
// without cniVersion and name (as in a PodNetwork's parameters).
type Network struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Plugin      json.RawMessage `json:"plugin"`
}

// Pod is one sandbox attached to one network.
type Pod struct {
	Name    string    `json:"name"`
	Node    string    `json:"node"`
	Network string    `json:"network"`
	Address string    `json:"address,omitempty"` // static address (static IPAM)
	QoS     *qos.Spec `json:"qos,omitempty"`
}

// Checks are verified with real traffic.
type Checks struct {
	Reach []Reach `json:"reach"`
	DSCP  []DSCP  `json:"dscp"`
	Rate  []Rate  `json:"rate"`
}

// Reach: an ICMP echo from a pod to a pod is answered, or must not be.
type Reach struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Expect bool   `json:"expect"`
}

// DSCP: the DSCP the receiving pod sees on a flow.
type DSCP struct {
	From     string `json:"from"`
	To       string `json:"to"`
	Protocol string `json:"protocol"`
	Port     uint16 `json:"port"`
	Expect   uint8  `json:"expect"`
}

// Rate: the rate a flow is received at, within 20% of ExpectBps.
type Rate struct {
	From      string  `json:"from"`
	To        string  `json:"to"`
	Protocol  string  `json:"protocol"`
	Port      uint16  `json:"port"`
	ExpectBps float64 `json:"expectBps"`
	OfferBps  float64 `json:"offerBps,omitempty"` // UDP: the offered rate
	What      string  `json:"what"`
}

// Parse decodes and validates a scenario.
func Parse(data []byte) (*Scenario, error) {
	s := &Scenario{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("decode scenario: %w", err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("invalid scenario: %w", err)
	}
	return s, nil
}

func (s *Scenario) validate() error {
	var errs field.Errors
	nodes := map[string]bool{}
	for _, n := range s.Nodes {
		nodes[n] = true
	}
	if len(s.Underlay) != len(s.Nodes) {
		errs.Add("underlay", "needs one address per node (%d nodes, %d addresses)", len(s.Nodes), len(s.Underlay))
	}
	for i, u := range s.Underlay {
		if _, err := netip.ParsePrefix(u); err != nil {
			errs.Add(field.Path("underlay").Index(i), "not an address in CIDR form: %q", u)
		}
	}
	nets := map[string]bool{}
	for i, n := range s.Networks {
		nets[n.Name] = true
		if _, err := netconf.RenderParameters(n.Name, contract.CNIVersion, n.Plugin); err != nil {
			errs.Add(field.Path("networks").Index(i).Child("plugin"), "%v", err)
		}
	}
	pods := map[string]bool{}
	for i, p := range s.Pods {
		pp := field.Path("pods").Index(i)
		pods[p.Name] = true
		if !nodes[p.Node] {
			errs.Add(pp.Child("node"), "no node %q", p.Node)
		}
		if !nets[p.Network] {
			errs.Add(pp.Child("network"), "no network %q", p.Network)
		}
		if p.Address != "" {
			if _, err := netip.ParsePrefix(p.Address); err != nil {
				errs.Add(pp.Child("address"), "not an address in CIDR form: %q", p.Address)
			}
		}
		errs.Append(p.QoS.Validate(pp.Child("qos")))
	}
	errs.Append(s.Checks.validate(pods)...)
	return errs.Err()
}

func (c *Checks) validate(pods map[string]bool) field.Errors {
	var errs field.Errors
	ref := func(p field.Path, from, to string) {
		for _, name := range []string{from, to} {
			if !pods[name] {
				errs.Add(p, "no pod %q", name)
			}
		}
	}
	for i, r := range c.Reach {
		ref(field.Path("checks.reach").Index(i), r.From, r.To)
	}
	for i, d := range c.DSCP {
		p := field.Path("checks.dscp").Index(i)
		ref(p, d.From, d.To)
		if !isL4(d.Protocol) {
			errs.Add(p.Child("protocol"), "must be TCP or UDP, got %q", d.Protocol)
		}
	}
	for i, r := range c.Rate {
		p := field.Path("checks.rate").Index(i)
		ref(p, r.From, r.To)
		if !isL4(r.Protocol) {
			errs.Add(p.Child("protocol"), "must be TCP or UDP, got %q", r.Protocol)
		}
		if r.ExpectBps <= 0 {
			errs.Add(p.Child("expectBps"), "must be positive")
		}
	}
	return errs
}

func isL4(p string) bool { return strings.EqualFold(p, "TCP") || strings.EqualFold(p, "UDP") }

// GetQoS summarises the pod's QoS for a table.
func (p Pod) GetQoS() string {
	q := p.QoS
	if q.IsZero() {
		return "-"
	}
	var parts []string
	if q.DSCP != nil {
		parts = append(parts, fmt.Sprintf("dscp %d", *q.DSCP))
	}
	if q.EgressRate > 0 {
		parts = append(parts, fmt.Sprintf("egress %g Mbit/s", float64(q.EgressRate)/1e6))
	}
	if q.IngressRate > 0 {
		parts = append(parts, fmt.Sprintf("ingress %g Mbit/s", float64(q.IngressRate)/1e6))
	}
	if len(q.Egress) > 0 {
		parts = append(parts, fmt.Sprintf("%d egress rules", len(q.Egress)))
	}
	return strings.Join(parts, ", ")
}
