package daemon

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/nadfile"
	"github.com/netclass-dev/netclass/plugins/attach"
	"github.com/netclass-dev/netclass/shim/multus"
)

// nadEntry is what the daemon keeps of a NetworkAttachmentDefinition: its
// name, labels and netclass's network annotation (what NetworkQoS NAD
// selectors and the generated-NAD lookup read), and the CNI network name
// its config runs under (what a Multus attachment's record is checked
// against); never the config itself, nor other annotations.
type nadEntry struct {
	metav1.PartialObjectMetadata
	// ConfigName is the CNI network name Multus runs the NAD's config
	// under: its "name", or the NAD's name when it has none (Multus fills
	// it in) or has no config at all (Multus then runs the node's config
	// file of that name); netclass-nad's, its network's list name. ""
	// when the config does not parse (Multus cannot run it either).
	ConfigName string
}

// DeepCopyObject implements runtime.Object.
func (e *nadEntry) DeepCopyObject() runtime.Object {
	c := &nadEntry{ConfigName: e.ConfigName}
	e.PartialObjectMetadata.DeepCopyInto(&c.PartialObjectMetadata)
	return c
}

// nadEntryOf is the NAD informer's transform: the object as it arrives
// (unstructured, whole) becomes its nadEntry before the cache keeps it.
// Anything else (a deletion marker) passes unchanged.
func nadEntryOf(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	e := &nadEntry{PartialObjectMetadata: metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(), ResourceVersion: u.GetResourceVersion(),
		Labels: u.GetLabels()}}}
	if v, ok := u.GetAnnotations()[contract.NADNetworkAnnotation]; ok {
		e.Annotations = map[string]string{contract.NADNetworkAnnotation: v}
	}
	config, _, _ := unstructured.NestedString(u.Object, "spec", "config")
	e.ConfigName = configName(u.GetName(), config)
	return e, nil
}

// configName is the CNI network name of a NAD's config, as Multus runs it
// (see nadEntry.ConfigName).
func configName(nadName, config string) string {
	if config == "" {
		return nadName
	}
	var c struct {
		Name    *string `json:"name"`
		Type    string  `json:"type"`
		Network string  `json:"network"`
	}
	if err := json.Unmarshal([]byte(config), &c); err != nil {
		return ""
	}
	if c.Type == nadfile.Type { // it runs its network's list, under that list's name
		ref, err := nadfile.ParseRef("network", c.Network)
		if err != nil {
			return ""
		}
		return ref.CNIName()
	}
	if c.Name == nil || *c.Name == "" {
		return nadName
	}
	return *c.Name
}

// generated reports whether netclass-controller made the NAD, and for
// which network ("<namespace>/<name>" or "<name>").
func (e *nadEntry) generated() (network string, ok bool) {
	network = e.Annotations[contract.NADNetworkAnnotation]
	return network, e.Labels[contract.NADManagedByLabel] == contract.Provider && network != ""
}

// madeOn is what a plugin's record says an interface was made on: its CNI
// network, and the NAD netclass-nad ran when it did (nadfile.NADOf; "" when
// the record does not say: a hand-written NAD, or netclass-nad of a config
// without "nad").
type madeOn struct {
	Network, NAD string
}

// madeOnOf reads a record's madeOn.
func madeOnOf(r *attach.Record) madeOn {
	return madeOn{Network: r.Network, NAD: nadfile.NADOf(r.Config)}
}

// nadMismatch says why a NAD that a pod's network-status names for an
// interface is not the one the interface was made from, by its record
// ("": it may be): the NAD the record names, when it names one; and the CNI
// network: a NAD netclass-controller generated runs its network's list
// (nadfile.Ref.CNIName), another its own config. e is the NAD as cached
// (nil: none such).
func nadMismatch(made madeOn, nad types.NamespacedName, e *nadEntry) string {
	if made.NAD != "" && made.NAD != nad.String() {
		return fmt.Sprintf("annotation %s names NetworkAttachmentDefinition %s, but the interface was made through NetworkAttachmentDefinition %s",
			multus.AnnotationNetworkStatus, nad, made.NAD)
	}
	if e == nil {
		return fmt.Sprintf("annotation %s names NetworkAttachmentDefinition %s, which does not exist", multus.AnnotationNetworkStatus, nad)
	}
	if network, ok := e.generated(); ok {
		if ref, err := nadfile.ParseRef(contract.NADNetworkAnnotation, network); err != nil || ref.CNIName() != made.Network {
			return fmt.Sprintf("annotation %s names NetworkAttachmentDefinition %s, netclass's NAD of network %s, but the interface was made on CNI network %q",
				multus.AnnotationNetworkStatus, nad, network, made.Network)
		}
		return ""
	}
	if e.ConfigName != "" && e.ConfigName != made.Network {
		return fmt.Sprintf("annotation %s names NetworkAttachmentDefinition %s, whose config is CNI network %q, but the interface was made on CNI network %q",
			multus.AnnotationNetworkStatus, nad, e.ConfigName, made.Network)
	}
	return ""
}
