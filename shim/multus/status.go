// Package multus reads what Multus writes on a pod: its network-status
// annotation, which names the NetworkAttachmentDefinition each interface
// of the pod was made from. netclass-dra's agent uses it to give the
// attachments Multus made with netclass plugins (from hand-written or
// generated NADs) their network identity. Pure: no API access.
package multus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// AnnotationNetworkStatus is where Multus records a pod's interfaces
// (NPWG's network-status: a JSON list, one entry per interface);
// AnnotationNetworks is where a pod asks Multus for its secondary networks.
const (
	AnnotationNetworkStatus = "k8s.v1.cni.cncf.io/network-status"
	AnnotationNetworks      = "k8s.v1.cni.cncf.io/networks"
)

// Status is one entry of the network-status annotation (the fields netclass reads).
type Status struct {
	// Name is the network's: "namespace/name" of a NetworkAttachmentDefinition,
	// or the cluster network's name for the primary interface.
	Name      string   `json:"name"`
	Interface string   `json:"interface"`
	IPs       []string `json:"ips,omitempty"`
	MAC       string   `json:"mac,omitempty"`
	Default   bool     `json:"default,omitempty"`
}

// ParseStatus decodes a network-status annotation; an empty value is an
// empty list.
func ParseStatus(value string) ([]Status, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var out []Status
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationNetworkStatus, err)
	}
	return out, nil
}

// NADOf finds the entry of the interface and the NetworkAttachmentDefinition
// it names: "namespace/name" as Multus writes it, or a bare name, which
// Multus reads in the pod's namespace. ok is false when no entry is for the
// interface, the entry is the default network's, or its name is not a valid
// NAD reference.
func NADOf(entries []Status, podNamespace, ifname string) (nad types.NamespacedName, entry Status, ok bool) {
	for _, e := range entries {
		if e.Interface != ifname || e.Default {
			continue
		}
		nad, err := ParseNADName(e.Name, podNamespace)
		if err != nil {
			return types.NamespacedName{}, e, false
		}
		return nad, e, true
	}
	return types.NamespacedName{}, Status{}, false
}

// ParseNADName parses a NetworkAttachmentDefinition reference:
// "namespace/name", or "name" in namespace ns.
func ParseNADName(s, ns string) (types.NamespacedName, error) {
	namespace, name, namespaced := strings.Cut(s, "/")
	if !namespaced {
		namespace, name = ns, s
	}
	var errs []error
	for _, m := range validation.IsDNS1123Label(namespace) {
		errs = append(errs, fmt.Errorf("namespace %q: %s", namespace, m))
	}
	for _, m := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, fmt.Errorf("name %q: %s", name, m))
	}
	if err := errors.Join(errs...); err != nil {
		return types.NamespacedName{}, fmt.Errorf("network %q: %w", s, err)
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, nil
}

// Unnamed says why a pod that asks Multus for secondary networks does not
// (yet) name the NetworkAttachmentDefinition of its interface ifname in its
// network-status: no annotation, one that does not parse, no entry for
// the interface, or an entry naming no valid NAD. "" when it names one,
// when the interface is the pod's default network, or when the pod asks
// Multus for nothing (the interface is then not Multus's to name).
func Unnamed(annotations map[string]string, podNamespace, ifname string) string {
	if _, asked := annotations[AnnotationNetworks]; !asked {
		return ""
	}
	value, written := annotations[AnnotationNetworkStatus]
	if !written {
		return "the pod has no " + AnnotationNetworkStatus + " annotation"
	}
	entries, err := ParseStatus(value)
	if err != nil {
		return err.Error()
	}
	for _, e := range entries {
		if e.Interface != ifname {
			continue
		}
		if e.Default {
			return ""
		}
		if _, err := ParseNADName(e.Name, podNamespace); err != nil {
			return fmt.Sprintf("annotation %s, interface %s: %v", AnnotationNetworkStatus, ifname, err)
		}
		return ""
	}
	return fmt.Sprintf("annotation %s has no entry for interface %s", AnnotationNetworkStatus, ifname)
}
