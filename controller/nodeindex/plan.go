// Package nodeindex gives every node a small, stable integer: the annotation
// netclass.dev/node-index (ncv1.AnnotationNodeIndex). netclass-dra carves each
// node's block of every host-local range of a network spanning nodes from it
// (conf/netspec.NodeBlock), so two nodes never hand out one address. An index
// is set once, to the lowest one no other node holds, and never changed while
// the node exists (an admission policy refuses any change); the index of a
// deleted node is free for the next new node.
package nodeindex

import (
	"cmp"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

// Index reads a node's index; ok is false when it has none (or a malformed one).
func Index(n *corev1.Node) (int, bool) {
	v, present := n.Annotations[ncv1.AnnotationNodeIndex]
	if !present {
		return 0, false
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || strconv.Itoa(i) != v {
		return 0, false
	}
	return i, true
}

// Assignment is one index to set.
type Assignment struct {
	Node  string
	Index int
}

// Plan assigns the lowest free index to every node without one, oldest node
// first (then by name), and lists the nodes that share an index with an
// older node (set by hand: they are reported, not changed).
func Plan(nodes []*corev1.Node) (assign []Assignment, duplicates []string) {
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b *corev1.Node) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	used := map[int]bool{}
	var missing []*corev1.Node
	for _, n := range sorted {
		i, ok := Index(n)
		switch {
		case !ok && n.DeletionTimestamp == nil:
			missing = append(missing, n)
		case !ok:
		case used[i]:
			duplicates = append(duplicates, n.Name)
		default:
			used[i] = true
		}
	}
	next := 0
	for _, n := range missing {
		for used[next] {
			next++
		}
		used[next] = true
		assign = append(assign, Assignment{Node: n.Name, Index: next})
	}
	return assign, duplicates
}
