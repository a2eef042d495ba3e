// Package nad keeps a Multus NetworkAttachmentDefinition (k8s.cni.cncf.io/v1)
// for every Ready netclass Network (same namespace, same name) and, opt-in,
// for a Ready PodNetwork of provider netclass.dev in each namespace its
// annotation netclass.dev/nad-namespaces lists. The NAD's config names the
// network for the delegating plugin netclass-nad, which runs what
// netclass-dra rendered for that network on the pod's node.
//
// Ownership: every generated NAD carries the label
// app.kubernetes.io/managed-by: netclass.dev and the annotation
// netclass.dev/network naming its network; NADs without them are never
// touched (a hand-written NAD of the same name is left alone and the network
// gets a Warning Event). A Network's NAD has an ownerReference to it; a
// PodNetwork is cluster-scoped and cannot own a namespaced object, so its
// NADs are collected by the controller itself (it lists its own NADs and
// deletes those no network wants). Every generated NAD holds the finalizer
// netclass.dev/nad-in-use: a NAD being deleted (by the controller or by the
// garbage collector after its Network went) stays until no pod that has not
// ended names it in k8s.v1.cni.cncf.io/networks (from a pod cache, pods.go;
// Controller.inUse says which pods of other namespaces count).
package nad

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/netclass-dev/netclass/api/contract"
	multinetworkv1 "github.com/netclass-dev/netclass/api/multinetwork/v1"
	netclassv1alpha1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/nadfile"
)

// GVR and kind of NetworkAttachmentDefinitions.
var (
	GVR = schema.GroupVersionResource{Group: contract.NADGroup, Version: contract.NADVersion, Resource: contract.NADResource}
	GVK = schema.GroupVersionKind{Group: contract.NADGroup, Version: contract.NADVersion, Kind: contract.NADKind}
)

// Labels, annotations and the finalizer of generated NADs.
const (
	LabelManagedBy = contract.NADManagedByLabel
	ManagedBy      = contract.Provider
	// AnnotationNetwork names the NAD's network: "<namespace>/<name>" for
	// a Network, "<name>" for a PodNetwork (netclass-nad's "network").
	AnnotationNetwork = contract.NADNetworkAnnotation
	// AnnotationNamespaces on a PodNetwork lists, comma-separated, the
	// namespaces that get a NAD of it.
	AnnotationNamespaces = "netclass.dev/nad-namespaces"
	// Finalizer holds a deleting NAD until no pod names it.
	Finalizer = "netclass.dev/nad-in-use"
	// PluginType is the delegating plugin a generated NAD's config names.
	PluginType = nadfile.Type
)

// Desired is one NAD the networks call for.
type Desired struct {
	Namespace, Name string
	// Network is the netclass-nad "network" value.
	Network string
	// Labels are the network object's own labels (so NetworkQoS NAD
	// selectors select the NAD by them) plus the managed-by label.
	Labels map[string]string
	// Owner is the Network owning the NAD (nil: a PodNetwork's).
	Owner *metav1.OwnerReference
}

// Key is the NAD's namespace/name.
func (d Desired) Key() string { return d.Namespace + "/" + d.Name }

// Problem says why a network has no NAD where it asked for one.
type Problem struct {
	Network string // the network's key: "<namespace>/<name>" or "<name>"
	Message string
}

// ParseNamespaces reads AnnotationNamespaces: comma-separated namespace
// names (DNS-1123 labels), spaces around them ignored, no repeats.
func ParseNamespaces(s string) ([]string, error) {
	var out []string
	var errs field.Errors
	seen := map[string]bool{}
	p := field.Path("metadata.annotations").Child(AnnotationNamespaces)
	for _, ns := range strings.Split(s, ",") {
		ns = strings.TrimSpace(ns)
		switch {
		case ns == "":
			errs.Add(p, "has an empty entry")
		case len(validation.IsDNS1123Label(ns)) > 0:
			errs.Add(p, "%q is not a namespace name", ns)
		case seen[ns]:
			errs.Add(p, "%q is listed twice", ns)
		default:
			seen[ns] = true
			out = append(out, ns)
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

func ready(conds []metav1.Condition, generation int64) bool {
	c := meta.FindStatusCondition(conds, netclassv1alpha1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && (c.ObservedGeneration == 0 || c.ObservedGeneration >= generation)
}

func labelsOf(own map[string]string) map[string]string {
	out := maps.Clone(own)
	if out == nil {
		out = map[string]string{}
	}
	out[LabelManagedBy] = ManagedBy
	return out
}

// Want lists the NADs the networks call for: one per Ready Network, and
// one per listed namespace of a Ready netclass.dev PodNetwork. Two networks
// wanting the same NAD (a PodNetwork listing a namespace with a Network of
// its name) both lose it, with a Problem each.
func Want(nets []*netclassv1alpha1.Network, pns []*multinetworkv1.PodNetwork) (map[string]Desired, []Problem) {
	out := map[string]Desired{}
	var problems []Problem
	clash := map[string][]string{}
	add := func(d Desired) {
		clash[d.Key()] = append(clash[d.Key()], d.Network)
		out[d.Key()] = d
	}
	for _, n := range nets {
		if n.DeletionTimestamp != nil || !ready(n.Status.Conditions, n.Generation) {
			continue
		}
		t := true
		add(Desired{Namespace: n.Namespace, Name: n.Name, Network: n.Namespace + "/" + n.Name, Labels: labelsOf(n.Labels),
			Owner: &metav1.OwnerReference{APIVersion: netclassv1alpha1.SchemeGroupVersion.String(), Kind: "Network", Name: n.Name, UID: n.UID, Controller: &t}})
	}
	for _, pn := range pns {
		v, ok := pn.Annotations[AnnotationNamespaces]
		if !ok || pn.Spec.Provider != contract.Provider || pn.DeletionTimestamp != nil || !ready(pn.Status.Conditions, pn.Generation) {
			continue
		}
		nss, err := ParseNamespaces(v)
		if err != nil {
			problems = append(problems, Problem{Network: pn.Name, Message: err.Error()})
			continue
		}
		for _, ns := range nss {
			add(Desired{Namespace: ns, Name: pn.Name, Network: pn.Name, Labels: labelsOf(pn.Labels)})
		}
	}
	for key, wanters := range clash {
		if len(wanters) < 2 {
			continue
		}
		delete(out, key)
		for _, w := range wanters {
			problems = append(problems, Problem{Network: w, Message: fmt.Sprintf("NAD %s is wanted by %s: none of them gets it", key, strings.Join(wanters, " and "))})
		}
	}
	return out, problems
}

// Config is the NAD's spec.config: netclass-nad naming the network and the
// NAD itself (which netclass-nad passes on to the records of its
// attachments: netclass-dra checks a pod's network-status against it),
// with the capabilities Multus fills in from the pod (netclass-nad passes
// them on to the plugins that declare them).
func Config(d Desired) string {
	b, _ := json.Marshal(map[string]any{
		"cniVersion": contract.CNIVersion, "name": d.Name, "type": PluginType, "network": d.Network, "nad": d.Key(),
		"capabilities": map[string]bool{"mac": true, "ips": true, "bandwidth": true, "qos": true},
	})
	return string(b)
}

// Object is the NAD d calls for.
func Object(d Desired) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace(d.Namespace)
	u.SetName(d.Name)
	u.SetLabels(d.Labels)
	u.SetAnnotations(map[string]string{AnnotationNetwork: d.Network})
	u.SetFinalizers([]string{Finalizer})
	if d.Owner != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{*d.Owner})
	}
	_ = unstructured.SetNestedField(u.Object, Config(d), "spec", "config")
	return u
}

// Owned reports whether netclass generated the NAD.
func Owned(u *unstructured.Unstructured) bool {
	return u.GetLabels()[LabelManagedBy] == ManagedBy && u.GetAnnotations()[AnnotationNetwork] != ""
}

// Current reports whether an owned NAD is what d calls for.
func Current(u *unstructured.Unstructured, d Desired) bool {
	cfg, _, _ := unstructured.NestedString(u.Object, "spec", "config")
	want := Object(d)
	return cfg == Config(d) && maps.Equal(u.GetLabels(), d.Labels) &&
		u.GetAnnotations()[AnnotationNetwork] == d.Network && hasFinalizer(u) &&
		equality.Semantic.DeepEqual(u.GetOwnerReferences(), want.GetOwnerReferences())
}

func hasFinalizer(u *unstructured.Unstructured) bool {
	for _, f := range u.GetFinalizers() {
		if f == Finalizer {
			return true
		}
	}
	return false
}
