// Package api is the root of netclass's Kubernetes API types:
//
//   - multinetwork/v1 (group multinetwork.networking.k8s.io): NetworkClass and
//     PodNetwork, the kinds of the multi-network proposals, in the proposals' shapes.
//   - netclass/v1alpha1 (group netclass.dev): ClusterNetwork, NodeNetwork,
//     Network and NetworkQoS.
//   - contract: the names and shapes netclass's parts agree on (driver name,
//     CNI version, device attributes, claim status data, AttachmentConfig).
//
// The CRD manifests generated from them live in conf/crd (scripts/api/generate.sh,
// make generate / make verify-generated). The tests of this package check the
// manifests as a set; api/README.md is the reference of every kind.
package api
