package netconf

import (
	"math"
	"strings"

	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/qos"
)

// SR-IOV limits.
const (
	MaxVLANQoS = 7
	// MaxTxRate bounds minTxRate/maxTxRate in Mbit/s (the kernel's field is 32 bits).
	MaxTxRate = math.MaxUint32
)

// isPCIAddress reports whether s is a PCI address "dddd:bb:dd.f" (domain,
// bus, device 0x00-0x1f, function 0-7). Hand-written rather than a regexp
// compiled at package init: every plugin binary would pay for it at start.
func isPCIAddress(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for _, i := range []int{0, 1, 2, 3, 5, 6, 8, 9} {
		if !isHex(s[i]) {
			return false
		}
	}
	return (s[8] == '0' || s[8] == '1') && s[11] >= '0' && s[11] <= '7'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// SRIOV configures netclass-sriov. Option names follow sriov-cni.
type SRIOV struct {
	Common
	// DeviceID is the VF's PCI address; runtimeConfig.deviceID overrides it.
	DeviceID string `json:"deviceID,omitempty"`
	// Master is the PF whose first free VF is taken when no deviceID is given.
	Master    string `json:"master,omitempty"`
	VLAN      *int   `json:"vlan,omitempty"`
	VLANQoS   *int   `json:"vlanQoS,omitempty"`
	VLANProto string `json:"vlanProto,omitempty"`
	Mac       string `json:"mac,omitempty"`
	SpoofChk  string `json:"spoofchk,omitempty"`
	Trust     string `json:"trust,omitempty"`
	LinkState string `json:"linkState,omitempty"`
	MinTxRate *int   `json:"minTxRate,omitempty"` // Mbit/s
	MaxTxRate *int   `json:"maxTxRate,omitempty"` // Mbit/s
	// OffloadEgressRate lets qos.egressRate be enforced by the VF's rate
	// limiter (maxTxRate) instead of a qdisc.
	OffloadEgressRate bool `json:"offloadEgressRate,omitempty"`
	MTU               int  `json:"mtu,omitempty"`
}

// VF link states.
const (
	LinkStateAuto    = "auto"
	LinkStateEnable  = "enable"
	LinkStateDisable = "disable"
)

// ParseSRIOV decodes and validates a netclass-sriov configuration.
func ParseSRIOV(data []byte) (*SRIOV, error) {
	c := &SRIOV{}
	if err := decode(data, c); err != nil {
		return nil, err
	}
	if err := invalid(TypeSRIOV, c.validate()); err != nil {
		return nil, err
	}
	c.Raw = data
	c.finish()
	if c.RuntimeConfig.DeviceID != "" {
		c.DeviceID = c.RuntimeConfig.DeviceID
	}
	c.VLANProto = strings.ToLower(c.VLANProto)
	if err := invalid(TypeSRIOV, c.validateOffload()); err != nil {
		return nil, err
	}
	return c, nil
}

// OffloadedEgressMbps is the effective qos.egressRate (static, runtime
// bandwidth or runtime qos) in Mbit/s, rounded up, when offloadEgressRate
// hands it to the VF's rate limiter (maxTxRate); 0 when nothing is offloaded.
func (c *SRIOV) OffloadedEgressMbps() int64 {
	if !c.OffloadEgressRate || c.EffectiveQoS == nil || c.EffectiveQoS.EgressRate <= 0 {
		return 0
	}
	return (c.EffectiveQoS.EgressRate + 999_999) / 1_000_000
}

// ShapedQoS is the effective QoS that qdiscs and rules enforce: without the
// egress rate and burst when they are offloaded.
func (c *SRIOV) ShapedQoS() *qos.Spec {
	if c.OffloadedEgressMbps() == 0 {
		return c.EffectiveQoS
	}
	s := *c.EffectiveQoS
	s.EgressRate, s.EgressBurst = 0, 0
	return &s
}

// validateOffload checks what only the merged QoS tells.
func (c *SRIOV) validateOffload() field.Errors {
	var errs field.Errors
	mbps := c.OffloadedEgressMbps()
	switch {
	case mbps > MaxTxRate:
		errs.Add("qos.egressRate", "%d Mbit/s is more than a VF's rate limiter takes (%d) with offloadEgressRate", mbps, int64(MaxTxRate))
	case mbps > 0 && c.MinTxRate != nil && int64(*c.MinTxRate) > mbps:
		errs.Add("minTxRate", "must not exceed the offloaded qos.egressRate (%d > %d Mbit/s)", *c.MinTxRate, mbps)
	}
	return errs
}

func (c *SRIOV) validate() field.Errors {
	errs := c.Common.validate()
	if c.DeviceID == "" && c.Master == "" && c.RuntimeConfig.DeviceID == "" {
		errs.Add("deviceID", "deviceID (a VF's PCI address, or runtimeConfig.deviceID) or master (a PF) is required")
	}
	for p, id := range map[field.Path]string{"deviceID": c.DeviceID, "runtimeConfig.deviceID": c.RuntimeConfig.DeviceID} {
		if id != "" && !isPCIAddress(id) {
			errs.Add(p, "must be a PCI address like 0000:03:00.2, got %q", id)
		}
	}
	if c.Master != "" {
		errs.Append(ValidateIfName("master", c.Master))
	}
	errs.Append(c.validateVLAN()...)
	if c.Mac != "" {
		errs.Append(ValidateMAC("mac", c.Mac))
	}
	errs.Append(validateOnOff("spoofchk", c.SpoofChk), validateOnOff("trust", c.Trust))
	switch c.LinkState {
	case "", LinkStateAuto, LinkStateEnable, LinkStateDisable:
	default:
		errs.Add("linkState", "must be auto, enable or disable, got %q", c.LinkState)
	}
	errs.Append(c.validateRates()...)
	errs.Append(validateMTU("mtu", c.MTU))
	return errs
}

func (c *SRIOV) validateVLAN() field.Errors {
	var errs field.Errors
	if c.VLAN != nil && (*c.VLAN < 0 || *c.VLAN > MaxVLANID) {
		errs.Add("vlan", "must be between 0 and %d, got %d", MaxVLANID, *c.VLAN)
	}
	if c.VLANQoS != nil && (*c.VLANQoS < 0 || *c.VLANQoS > MaxVLANQoS) {
		errs.Add("vlanQoS", "must be between 0 and %d, got %d", MaxVLANQoS, *c.VLANQoS)
	}
	if (c.VLANQoS != nil && *c.VLANQoS != 0 || c.VLANProto != "") && (c.VLAN == nil || *c.VLAN == 0) {
		errs.Add("vlan", "must be set (1-%d) when vlanQoS or vlanProto is set", MaxVLANID)
	}
	switch strings.ToLower(c.VLANProto) {
	case "", "802.1q", "802.1ad":
	default:
		errs.Add("vlanProto", "must be 802.1q or 802.1ad, got %q", c.VLANProto)
	}
	return errs
}

func (c *SRIOV) validateRates() field.Errors {
	var errs field.Errors
	for _, r := range []struct {
		p field.Path
		v *int
	}{{"minTxRate", c.MinTxRate}, {"maxTxRate", c.MaxTxRate}} {
		if r.v != nil && (*r.v < 0 || int64(*r.v) > MaxTxRate) {
			errs.Add(r.p, "must be between 0 and %d Mbit/s, got %d", int64(MaxTxRate), *r.v)
		}
	}
	if c.MinTxRate != nil && c.MaxTxRate != nil && *c.MaxTxRate > 0 && *c.MinTxRate > *c.MaxTxRate {
		errs.Add("minTxRate", "must not exceed maxTxRate (%d > %d)", *c.MinTxRate, *c.MaxTxRate)
	}
	if c.OffloadEgressRate && c.MaxTxRate != nil {
		errs.Add("offloadEgressRate", "cannot be combined with maxTxRate: both set the VF's rate limiter")
	}
	return errs
}

func validateOnOff(p field.Path, v string) error {
	switch v {
	case "", "on", "off":
		return nil
	}
	return field.Invalid(p, `must be "on" or "off", got %q`, v)
}
