package attachment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/conf/strictjson"
)

// reservedIfNames are taken in every pod: the loopback and the primary network's interface.
var reservedIfNames = map[string]bool{"lo": true, "eth0": true}

// configKeys are the AttachmentConfig's keys, spelled exactly.
var configKeys = map[string]bool{"apiVersion": true, "kind": true, "interfaceName": true, "mac": true, "ips": true, "qos": true}

// ParseConfig decodes an AttachmentConfig strictly (unknown fields, keys in
// another case and duplicate keys are errors, at every level of the qos
// block too: Go's JSON decoder would match "InterfaceName" or "interfacename"
// and keep the last of two) and validates it, reporting every problem at
// once. conf/deploy's admission policy refuses exactly what it refuses
// (duplicate keys aside, which the API server's decoded objects cannot show).
func ParseConfig(raw []byte) (*contract.AttachmentConfig, error) {
	if err := exactKeys(raw); err != nil {
		return nil, fmt.Errorf("decode %s: %w", contract.AttachmentConfigKind, err)
	}
	var top struct {
		QoS json.RawMessage `json:"qos"`
	}
	if json.Unmarshal(raw, &top) == nil && len(top.QoS) > 0 {
		if err := exactQoSKeys(top.QoS); err != nil {
			return nil, fmt.Errorf("decode %s: %w", contract.AttachmentConfigKind, err)
		}
	}
	c := &contract.AttachmentConfig{}
	if err := strictjson.Decode(raw, c); err != nil {
		return nil, fmt.Errorf("decode %s: %w", contract.AttachmentConfigKind, err)
	}
	if err := Validate(c); err != nil {
		return nil, fmt.Errorf("invalid %s: %w", contract.AttachmentConfigKind, err)
	}
	return c, nil
}

// exactKeys checks the top-level keys of a JSON object: each must be one of
// configKeys, spelled exactly, and given once.
func exactKeys(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("must be a JSON object")
	}
	var errs field.Errors
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		switch {
		case seen[key]:
			errs.Add(field.Path(key), "is given twice")
		case !configKeys[key]:
			errs.Add(field.Path(key), "is not a field of %s (fields are case-sensitive)", contract.AttachmentConfigKind)
		}
		seen[key] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	return errs.Err()
}

// Validate checks every field of an AttachmentConfig and joins all problems.
func Validate(c *contract.AttachmentConfig) error {
	var errs field.Errors
	if c.APIVersion != contract.AttachmentConfigAPIVersion {
		errs.Add("apiVersion", "must be %q, got %q", contract.AttachmentConfigAPIVersion, c.APIVersion)
	}
	if c.Kind != contract.AttachmentConfigKind {
		errs.Add("kind", "must be %q, got %q", contract.AttachmentConfigKind, c.Kind)
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
		errs.Append(mappedCIDRs(c.QoS)...)
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

func validateMAC(s string) error { return netconf.ValidateMAC("mac", s) }

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
		if a.Is4In6() {
			errs = append(errs, field.Invalid(p, "%s is an IPv4-mapped IPv6 address: write the IPv4 address", a))
			continue
		}
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
func Merge(base, over *contract.AttachmentConfig) *contract.AttachmentConfig {
	if base == nil && over == nil {
		return nil
	}
	out := &contract.AttachmentConfig{APIVersion: contract.AttachmentConfigAPIVersion, Kind: contract.AttachmentConfigKind}
	for _, c := range []*contract.AttachmentConfig{base, over} {
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
