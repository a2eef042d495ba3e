package netconf

import (
	"regexp"
	"strings"

	"github.com/netclass-dev/netclass/conf/field"
)

// SR-IOV limits.
const (
	MaxVLANQoS = 7
)

var pciAddress = regexp.MustCompile(`^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-1][0-9a-fA-F]\.[0-7]$`)

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
	return c, nil
}

func (c *SRIOV) validate() field.Errors {
	errs := c.Common.validate()
	if c.DeviceID == "" && c.Master == "" && c.RuntimeConfig.DeviceID == "" {
		errs.Add("deviceID", "deviceID (a VF's PCI address, or runtimeConfig.deviceID) or master (a PF) is required")
	}
	for p, id := range map[field.Path]string{"deviceID": c.DeviceID, "runtimeConfig.deviceID": c.RuntimeConfig.DeviceID} {
		if id != "" && !pciAddress.MatchString(id) {
			errs.Add(p, "must be a PCI address like 0000:03:00.2, got %q", id)
		}
	}
	if c.Master != "" {
		errs.Append(ValidateIfName("master", c.Master))
	}
	errs.Append(c.validateVLAN()...)
	if c.Mac != "" {
		errs.Append(validateMAC("mac", c.Mac))
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
	if c.MinTxRate != nil && *c.MinTxRate < 0 {
		errs.Add("minTxRate", "must not be negative, got %d", *c.MinTxRate)
	}
	if c.MaxTxRate != nil && *c.MaxTxRate < 0 {
		errs.Add("maxTxRate", "must not be negative, got %d", *c.MaxTxRate)
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
