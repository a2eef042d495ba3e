package render

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/qos"
	"github.com/netclass-dev/netclass/shim/network"
)

// Peers resolves a destination's pod and namespace selectors to the
// addresses the selected pods have on the network.
type Peers interface {
	Addresses(namespace string, to ncv1.Destination, net network.Network) ([]netip.Addr, error)
}

// Target is the pod and network a NetworkQoS may select.
type Target struct {
	Namespace string
	PodLabels map[string]string
	Network   network.Network
	// NAD is the NetworkAttachmentDefinition the attachment was made
	// through (nil: none known), which NetworkQoS selects with
	// networkSelectionType NetworkAttachmentDefinitions.
	NAD *NAD
}

// NAD is a NetworkAttachmentDefinition as a NetworkQoS NAD selector sees
// it: its identity, its labels and its namespace's labels (from listers).
type NAD struct {
	Namespace, Name string
	Labels          map[string]string
	NamespaceLabels map[string]string
}

// SelectsNAD reports whether sel selects nad: its namespace's labels match
// namespaceSelector and its own labels networkSelector (empty selectors
// select all). A nil NAD or selector selects nothing.
func SelectsNAD(sel *ncv1.NetworkAttachmentDefinitionSelector, nad *NAD) (bool, error) {
	if sel == nil || nad == nil {
		return false, nil
	}
	nsSel, err := metav1.LabelSelectorAsSelector(&sel.NamespaceSelector)
	if err != nil {
		return false, fmt.Errorf("namespaceSelector: %w", err)
	}
	netSel, err := metav1.LabelSelectorAsSelector(&sel.NetworkSelector)
	if err != nil {
		return false, fmt.Errorf("networkSelector: %w", err)
	}
	return nsSel.Matches(labels.Set(nad.NamespaceLabels)) && netSel.Matches(labels.Set(nad.Labels)), nil
}

// Rules compiles the NetworkQoS objects of the pod's namespace that select the
// pod and the network into qos egress rules. A rule's priority is the object's
// priority × 20 plus the rule's index (OKEP-4380: later rules and higher
// priorities win, without collisions). A rule whose destinations resolve to no
// address is dropped: an empty destination list would match everything.
// selected names the objects that select the pod on the network.
//
// Selectors are written by namespace users and resolve to as many pods as
// they select: each distinct destination is resolved once per call, a
// rule's addresses are counted once, and the rules of one attachment
// classify at most MaxSelectedAddresses addresses, given to the rules in
// the order they take precedence (the highest priority first): a rule over
// what is left is dropped with an error naming it, never one that would
// win over it. (More rules than qos.MaxRules fail the attachment's plan as
// a whole: ApplyFailed in the objects' status.)
func Rules(objs []*ncv1.NetworkQoS, target Target, peers Peers) (rules []qos.Rule, selected []string, err error) {
	sorted := append([]*ncv1.NetworkQoS(nil), objs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var slots []ruleSlot // every selected object's rules, in name order
	var errs []error
	for _, obj := range sorted {
		ok, err := Selects(obj, target)
		if err != nil {
			errs = append(errs, &IgnoredRule{Namespace: obj.Namespace, Name: obj.Name, Err: err})
			continue
		}
		if ok {
			selected = append(selected, obj.Name)
			for i := range obj.Spec.Egress {
				slots = append(slots, ruleSlot{obj: obj, index: i})
			}
		}
	}
	res := &resolver{peers: peers, seen: map[string][]netip.Addr{}, left: MaxSelectedAddresses}
	for _, k := range byPrecedence(slots) {
		s := &slots[k]
		s.rule, s.keep, s.err = compileRule(s.obj, s.index, s.obj.Spec.Egress[s.index], target, res)
	}
	for _, s := range slots {
		if s.err != nil {
			errs = append(errs, s.err)
		} else if s.keep {
			rules = append(rules, s.rule)
		}
	}
	return rules, selected, errors.Join(errs...)
}

// ruleSlot is spec.egress[index] of obj and what it compiled to.
type ruleSlot struct {
	obj   *ncv1.NetworkQoS
	index int
	rule  qos.Rule
	keep  bool
	err   error
}

// byPrecedence orders slots' indexes as the plan takes precedence among the
// rules (conf/qos): the highest priority first, a later rule first among
// equal ones.
func byPrecedence(slots []ruleSlot) []int {
	order := make([]int, len(slots))
	for k := range order {
		order[k] = len(slots) - 1 - k
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return rulePriority(slots[b].obj, slots[b].index) - rulePriority(slots[a].obj, slots[a].index)
	})
	return order
}

// Selects reports whether a NetworkQoS applies to the pod on the network.
// Without networkSelectors it selects the default network only (the pod's
// primary interface, network.Default), as OKEP-4380 says.
func Selects(obj *ncv1.NetworkQoS, t Target) (bool, error) {
	if obj.Namespace != t.Namespace {
		return false, nil
	}
	pods, err := metav1.LabelSelectorAsSelector(&obj.Spec.PodSelector)
	if err != nil {
		return false, fmt.Errorf("podSelector: %w", err)
	}
	if !pods.Matches(labels.Set(t.PodLabels)) {
		return false, nil
	}
	if len(obj.Spec.NetworkSelectors) == 0 {
		return t.Network.IsDefault(), nil
	}
	for _, ns := range obj.Spec.NetworkSelectors {
		var sel *metav1.LabelSelector
		switch {
		case ns.NetworkSelectionType == ncv1.DefaultNetwork && t.Network.IsDefault():
			return true, nil
		case ns.NetworkSelectionType == ncv1.NetworkAttachmentDefinitions:
			ok, err := SelectsNAD(ns.NetworkAttachmentDefinitionSelector, t.NAD)
			if err != nil || ok {
				return ok, wrapSel(err)
			}
			continue
		case ns.NetworkSelectionType == ncv1.PodNetworks && t.Network.Ref.Kind == network.PodNetworkGVK.Kind:
			sel = ns.PodNetworkSelector
		case ns.NetworkSelectionType == ncv1.Networks && t.Network.Ref.Kind == network.NetworkGVK.Kind:
			sel = ns.NetworkSelector
		default:
			continue
		}
		if sel == nil {
			return true, nil
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		if err != nil {
			return false, wrapSel(err)
		}
		if s.Matches(labels.Set(t.Network.Labels)) {
			return true, nil
		}
	}
	return false, nil
}

// wrapSel names the field of a networkSelectors error (nil stays nil).
func wrapSel(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("networkSelectors: %w", err)
}

// IgnoredRule is what Rules left out of an attachment's rules, and why: a
// rule of a NetworkQoS (Path is its spec.egress[i]) or, with Path "", the
// whole object (its selectors cannot be read).
type IgnoredRule struct {
	Namespace, Name, Path string
	Err                   error
}

func (e *IgnoredRule) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("NetworkQoS %s/%s: %v", e.Namespace, e.Name, e.Err)
	}
	return fmt.Sprintf("NetworkQoS %s/%s %s: %v", e.Namespace, e.Name, e.Path, e.Err)
}

func (e *IgnoredRule) Unwrap() error { return e.Err }

// IgnoredRules lists what err, an error of Rules, says was left out.
func IgnoredRules(err error) []*IgnoredRule {
	if ir, ok := err.(*IgnoredRule); ok {
		return []*IgnoredRule{ir}
	}
	var out []*IgnoredRule
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, IgnoredRules(e)...)
		}
	}
	return out
}

// compileRule compiles a rule, its destination selectors resolved to
// addresses; keep is false for a rule whose destinations select nothing.
func compileRule(obj *ncv1.NetworkQoS, i int, r ncv1.Rule, t Target, res *resolver) (rule qos.Rule, keep bool, err error) {
	out := staticRule(obj, i, r)
	path := field.Path("spec.egress").Index(i)
	ignored := func(err error) error {
		return &IgnoredRule{Namespace: obj.Namespace, Name: obj.Name, Path: string(path), Err: err}
	}
	// The controller reports an invalid object (Accepted=False); its rule
	// must not fail the others' with it, nor cost their selectors' budget.
	if err := out.Validate(""); err != nil {
		return qos.Rule{}, false, ignored(err)
	}
	// The admin's DSCP policy of the network is no tenant's to widen.
	if err := t.Network.DSCPPolicy.CheckRule(&out, ""); err != nil {
		return qos.Rule{}, false, ignored(err)
	}
	if r.Classifier == nil || len(r.Classifier.To) == 0 {
		return out, true, nil
	}
	addrs, err := res.selected(obj.Namespace, r.Classifier.To, t.Network)
	if err != nil {
		return qos.Rule{}, false, ignored(err)
	}
	for _, a := range addrs {
		out.Classifier.To = append(out.Classifier.To, qos.Peer{IPBlock: &qos.IPBlock{CIDR: netip.PrefixFrom(a, a.BitLen()).String()}})
	}
	return out, len(out.Classifier.To) > 0, nil
}

// staticRule is the rule without the addresses of its destination
// selectors: its DSCP, bandwidth, ports and ipBlocks.
func staticRule(obj *ncv1.NetworkQoS, i int, r ncv1.Rule) qos.Rule {
	dscp := int(r.DSCP)
	out := qos.Rule{Priority: rulePriority(obj, i), DSCP: &dscp}
	if r.Bandwidth != nil && r.Bandwidth.Rate != nil {
		out.Bandwidth = &qos.Bandwidth{Rate: *r.Bandwidth.Rate}
		if r.Bandwidth.Burst != nil {
			out.Bandwidth.Burst = *r.Bandwidth.Burst
		}
	}
	if r.Classifier == nil {
		return out
	}
	for _, p := range r.Classifier.Ports {
		port := qos.Port{Protocol: string(p.Protocol)}
		if p.Port != nil {
			v := int(*p.Port)
			port.Port = &v
		}
		out.Classifier.Ports = append(out.Classifier.Ports, port)
	}
	for _, to := range r.Classifier.To {
		if to.IPBlock != nil {
			out.Classifier.To = append(out.Classifier.To, ipBlock(to.IPBlock))
		}
	}
	return out
}

// rulePriority is the qos priority of obj's spec.egress[i] (see Rules).
func rulePriority(obj *ncv1.NetworkQoS, i int) int {
	return int(obj.Spec.Priority)*ncv1.MaxNetworkQoSRules + i
}

func ipBlock(b *ncv1.IPBlock) qos.Peer {
	out := &qos.IPBlock{CIDR: string(b.CIDR)}
	for _, e := range b.Except {
		out.Except = append(out.Except, string(e))
	}
	return qos.Peer{IPBlock: out}
}

// Bounds of what the destination selectors of the NetworkQoS rules of one
// attachment cost (NetworkPolicy's are in shim/netpolicy).
const (
	// MaxSelectedAddresses bounds the pod addresses they classify.
	MaxSelectedAddresses = 4000
	// MaxSelectors bounds the distinct selectors resolved (each looks at
	// every pod of the namespaces it selects).
	MaxSelectors = 256
)

// resolver resolves the destination selectors of one Rules call, each
// distinct one once, and counts what is left of the bounds.
type resolver struct {
	peers Peers
	seen  map[string][]netip.Addr
	left  int
}

// selected are the addresses a rule's destination selectors select, each
// once; more than are left is an error. It never holds much more than
// what is left and one selector's addresses.
func (r *resolver) selected(namespace string, tos []ncv1.Destination, net network.Network) ([]netip.Addr, error) {
	var addrs []netip.Addr
	inRule := map[string]bool{}
	for _, to := range tos {
		if to.IPBlock != nil {
			continue
		}
		a, key, err := r.addresses(namespace, to, net)
		if err != nil {
			return nil, err
		}
		if inRule[key] {
			continue
		}
		inRule[key] = true
		if addrs = append(addrs, a...); len(addrs) > r.left {
			if addrs = sortedSet(addrs); len(addrs) > r.left {
				// no count of what is left: it follows other rules' pods, and the
				// message goes into the object's status, written when it changes
				return nil, fmt.Errorf("its destination selectors select more addresses than are left of the %d netclass classifies for one attachment",
					MaxSelectedAddresses)
			}
		}
	}
	addrs = sortedSet(addrs)
	r.left -= len(addrs)
	return addrs, nil
}

func sortedSet(addrs []netip.Addr) []netip.Addr {
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(addrs)
}

// addresses resolves one destination's selectors, and names it (key).
func (r *resolver) addresses(namespace string, to ncv1.Destination, net network.Network) ([]netip.Addr, string, error) {
	if r.peers == nil {
		return nil, "", fmt.Errorf("pod and namespace selectors cannot be resolved here")
	}
	b, err := json.Marshal(to)
	if err != nil {
		return nil, "", fmt.Errorf("destination: %w", err)
	}
	key := namespace + "\x00" + string(b) // one network per call
	if a, ok := r.seen[key]; ok {
		return a, key, nil
	}
	if len(r.seen) >= MaxSelectors {
		return nil, "", fmt.Errorf("more than the %d distinct destination selectors netclass resolves for one attachment", MaxSelectors)
	}
	a, err := r.peers.Addresses(namespace, to, net)
	if err != nil {
		return nil, "", fmt.Errorf("resolve destination selectors: %w", err)
	}
	r.seen[key] = a
	return a, key, nil
}
