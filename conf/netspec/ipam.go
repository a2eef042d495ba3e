package netspec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"

	"github.com/netclass-dev/netclass/conf/field"
)

// IPAM delegates run as root on every node with the configuration netclass
// hands them, so what a namespace user may write into a Network's spec.ipam is
// an allow-list, never a pass-through: the ClusterNetwork (an admin's object)
// owns the IPAM type, and a tenant may only choose addresses and routes within
// it. Paths (host-local's dataDir, dhcp's daemonSocketPath, whereabouts'
// kubeconfig), other plugin types and unknown keys are refused.

// tenantKeys are the top-level keys a Network's ipam may set, per IPAM type.
var tenantKeys = map[string][]string{
	"host-local": {"type", "ranges", "routes"},
	"static":     {"type", "addresses", "routes"},
	"dhcp":       {"type"},
}

// Keys allowed inside list entries, whatever the type.
var (
	rangeKeys   = []string{"subnet", "rangeStart", "rangeEnd", "gateway"}
	routeKeys   = []string{"dst", "gw"}
	addressKeys = []string{"address", "gateway"}
)

// TenantIPAM returns the IPAM configuration a Network runs with: the
// ClusterNetwork's (cluster, may be nil) when the Network sets none, else the
// Network's own (tenant), checked against the allow-list for the
// ClusterNetwork's IPAM type. Every problem is reported with its field path
// under spec.ipam.
func TenantIPAM(cluster, tenant []byte) (map[string]any, error) {
	base, err := object(cluster, "ClusterNetwork spec.ipam")
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(tenant)) == 0 || string(bytes.TrimSpace(tenant)) == "null" {
		return base, nil
	}
	p := field.Path("spec.ipam")
	own, err := object(tenant, string(p))
	if err != nil {
		return nil, err
	}
	owner, _ := base["type"].(string)
	allowed, known := tenantKeys[owner]
	if owner == "" {
		return nil, field.Invalid(p, "the ClusterNetwork sets no ipam type, so a Network cannot choose an IPAM plugin of its own")
	}
	if !known {
		return nil, field.Invalid(p, "the ClusterNetwork's IPAM type %q does not let a Network set its own ipam (only %s do)", owner, typeList())
	}
	var errs field.Errors
	if t, ok := own["type"]; ok && t != owner {
		errs.Add(p.Child("type"), "must be the ClusterNetwork's IPAM type %q, got %v", owner, t)
	}
	for _, k := range sortedKeys(own) {
		if !contains(allowed, k) {
			errs.Add(p.Child(k), "is not allowed in a Network's ipam (allowed for %s: %v)", owner, allowed)
		}
	}
	errs.Append(checkRanges(p.Child("ranges"), own["ranges"])...)
	errs.Append(checkEntries(p.Child("routes"), own["routes"], routeKeys, map[string]func(string) bool{"dst": isPrefix, "gw": isAddr})...)
	errs.Append(checkEntries(p.Child("addresses"), own["addresses"], addressKeys, map[string]func(string) bool{"address": isPrefix, "gateway": isAddr})...)
	if err := errs.Err(); err != nil {
		return nil, err
	}
	own["type"] = owner
	return own, nil
}

func object(raw []byte, what string) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, field.Invalid(field.Path(what), "must be a JSON object: %v", err)
	}
	return obj, nil
}

// checkRanges: host-local's ranges are a list of range sets, each a list of ranges.
func checkRanges(p field.Path, v any) []error {
	if v == nil {
		return nil
	}
	sets, ok := v.([]any)
	if !ok {
		return []error{field.Invalid(p, "must be a list of range sets")}
	}
	var errs []error
	for i, set := range sets {
		errs = append(errs, checkEntries(p.Index(i), set, rangeKeys,
			map[string]func(string) bool{"subnet": isPrefix, "rangeStart": isAddr, "rangeEnd": isAddr, "gateway": isAddr})...)
	}
	return errs
}

// checkEntries checks a list of objects whose keys must be in allowed and
// whose string values must pass their key's check.
func checkEntries(p field.Path, v any, allowed []string, checks map[string]func(string) bool) []error {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	if !ok {
		return []error{field.Invalid(p, "must be a list")}
	}
	var errs []error
	for i, e := range list {
		ep := p.Index(i)
		obj, ok := e.(map[string]any)
		if !ok {
			errs = append(errs, field.Invalid(ep, "must be an object"))
			continue
		}
		for _, k := range sortedKeys(obj) {
			check, known := checks[k]
			s, isString := obj[k].(string)
			switch {
			case !contains(allowed, k):
				errs = append(errs, field.Invalid(ep.Child(k), "is not allowed (allowed: %v)", allowed))
			case !isString || (known && !check(s)):
				errs = append(errs, field.Invalid(ep.Child(k), "%v is not a valid %s", obj[k], k))
			}
		}
	}
	return errs
}

func isPrefix(s string) bool { _, err := netip.ParsePrefix(s); return err == nil }
func isAddr(s string) bool   { _, err := netip.ParseAddr(s); return err == nil }

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func typeList() string {
	types := make([]string, 0, len(tenantKeys))
	for t := range tenantKeys {
		types = append(types, t)
	}
	sort.Strings(types)
	return fmt.Sprint(types)
}
