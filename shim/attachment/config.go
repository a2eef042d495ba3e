package attachment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"

	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
)

// Opaque configuration identity (DESIGN.md).
const (
	ConfigAPIVersion = "netclass.dev/v1alpha1"
	ConfigKind       = "AttachmentConfig"
)

// Config is the opaque configuration of a claim request or DeviceClass for
// driver netclass.dev. Every field is optional.
type Config struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// InterfaceName is the name of the interface in the pod (default net1, net2, …).
	InterfaceName string `json:"interfaceName,omitempty"`
	// MAC is a static hardware address for the interface.
	MAC string `json:"mac,omitempty"`
	// IPs are static addresses in CIDR form, handed to IPAM (capability "ips").
	IPs []string `json:"ips,omitempty"`
	// QoS is merged over the network's qos block.
	QoS *qos.Spec `json:"qos,omitempty"`
}

// reservedIfNames are taken in every pod: the loopback and the primary network's interface.
var reservedIfNames = map[string]bool{"lo": true, "eth0": true}

// ParseConfig decodes an AttachmentConfig strictly (unknown fields are
// errors) and validates it, reporting every problem at once.
func ParseConfig(raw []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	c := &Config{}
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("decode %s: %w", ConfigKind, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode %s: trailing data after the object", ConfigKind)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("invalid %s: %w", ConfigKind, err)
	}
	return c, nil
}

// Validate checks every field and joins all problems.
func (c *Config) Validate() error {
	var errs field.Errors
	if c.APIVersion != ConfigAPIVersion {
		errs.Add("apiVersion", "must be %q, got %q", ConfigAPIVersion, c.APIVersion)
	}
	if c.Kind != ConfigKind {
		errs.Add("kind", "must be %q, got %q", ConfigKind, c.Kind)
	}
	if c.InterfaceName != "" {
		errs.Append(validateIfName(c.InterfaceName))
	}
	if c.MAC != "" {
		errs.Append(validateMAC(c.MAC))
	}
	errs.Append(validateIPs(c.IPs)...)
	if c.QoS != nil {
		errs.Append(c.QoS.Validate("qos"))
	}
	return errs.Err()
}

func validateIfName(name string) error {
	if err := netconf.ValidateIfName("interfaceName", name); err != nil {
		return err
	}
	if reservedIfNames[name] {
		return field.Invalid("interfaceName", "%q is taken by the pod's loopback or primary interface", name)
	}
	return nil
}

func validateMAC(s string) error {
	hw, err := net.ParseMAC(s)
	switch {
	case err != nil:
		return field.Invalid("mac", "%q is not a MAC address", s)
	case len(hw) != 6:
		return field.Invalid("mac", "%q is not a 48-bit Ethernet address", s)
	case hw[0]&1 == 1:
		return field.Invalid("mac", "%q is a multicast address", s)
	case bytes.Equal(hw, make(net.HardwareAddr, 6)):
		return field.Invalid("mac", "%q is the all-zero address", s)
	}
	return nil
}

func validateIPs(ips []string) []error {
	var errs []error
	seen := map[netip.Addr]bool{}
	for i, s := range ips {
		p := field.Path("ips").Index(i)
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			errs = append(errs, field.Invalid(p, "%q is not an address in CIDR form (10.1.1.5/24)", s))
			continue
		}
		a := pfx.Addr()
		if !a.IsGlobalUnicast() {
			errs = append(errs, field.Invalid(p, "%s is not a unicast address", a))
		}
		if pfx.Masked().Addr() == a && pfx.Bits() < a.BitLen()-1 {
			errs = append(errs, field.Invalid(p, "%s is the network address of %s", a, pfx.Masked()))
		}
		if seen[a] {
			errs = append(errs, field.Invalid(p, "%s is listed twice", a))
		}
		seen[a] = true
	}
	return errs
}

// Merge returns base with every field over sets replacing it; qos blocks
// merge field by field (conf/qos.Merge). Either may be nil.
func Merge(base, over *Config) *Config {
	if base == nil && over == nil {
		return nil
	}
	out := &Config{APIVersion: ConfigAPIVersion, Kind: ConfigKind}
	for _, c := range []*Config{base, over} {
		if c == nil {
			continue
		}
		if c.InterfaceName != "" {
			out.InterfaceName = c.InterfaceName
		}
		if c.MAC != "" {
			out.MAC = c.MAC
		}
		if c.IPs != nil {
			out.IPs = append([]string(nil), c.IPs...)
		}
		if c.QoS != nil {
			out.QoS = qos.Merge(out.QoS, c.QoS)
		}
	}
	return out
}
