// Package v1alpha1 holds netclass's own API types, group netclass.dev:
//
//   - ClusterNetwork (cluster-scoped): an admin's VLAN or VXLAN network model
//     (plugin type, default options, the nodes it may exist on, default IPAM
//     and QoS), after the proposals' engine model (api/contract/README.md).
//   - NodeNetwork (cluster-scoped): one per (ClusterNetwork, node); the node
//     daemon reports in its status whether the node can carry the network.
//   - Network (namespaced): a VLAN ID or VNI under a ClusterNetwork, rendered
//     into a netclass-vlan or netclass-vxlan plugin config.
//   - NetworkQoS (namespaced): OKEP-4380 DSCP marking and metering rules for
//     the egress traffic of selected pods on selected networks, compiled into
//     the plugins' qos block.
//
// +kubebuilder:object:generate=true
// +groupName=netclass.dev
package v1alpha1
