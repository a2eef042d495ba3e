package v1alpha1_test

import (
	"fmt"
	"strings"

	"github.com/netclass-dev/netclass/api/internal/crdschema"
)

// The schema cases run offline against the CRD manifests (schema_test.go)
// and, with the testbed build tag, against a real API server
// (testbed_test.go). Object names start with "apitest-" so the live run
// cannot collide with anything else in the cluster.

// edit returns base with old replaced by new (exactly once: a case whose
// edit does not apply must not silently test the base object).
func edit(base, old, new string) string {
	if strings.Count(base, old) != 1 {
		panic(fmt.Sprintf("edit: %q occurs %d times", old, strings.Count(base, old)))
	}
	return strings.Replace(base, old, new, 1)
}

// pcpEntries is a pcpMap of n entries, keys 0 on (past 63 they are no DSCP).
func pcpEntries(n int) string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf(`"%d": %d`, i, i>>3))
	}
	return strings.Join(out, ", ")
}

// --- ClusterNetwork ---------------------------------------------------------------------------

const vlanClusterNetwork = `
apiVersion: netclass.dev/v1alpha1
kind: ClusterNetwork
metadata: {name: apitest-vlan}
spec:
  type: netclass-vlan
  defaultOptions:
    vlan: {master: eth1, mtu: 1500}
  nodeSelector: {matchLabels: {netclass.dev/trunk: "true"}}
  ipam: {type: host-local, ranges: [[{subnet: 10.1.0.0/24}]], routes: [{dst: 0.0.0.0/0}]}
  qos: {egressRate: 1000000, egressBurst: 10000, dscp: 10}
`

const vxlanClusterNetwork = `
apiVersion: netclass.dev/v1alpha1
kind: ClusterNetwork
metadata: {name: apitest-vxlan}
spec:
  type: netclass-vxlan
  defaultOptions:
    vxlan: {master: eth0, remotes: [192.0.2.1, "2001:db8::1"], learning: false}
`

var clusterNetworkCases = []crdschema.Case{
	{Name: "vlan", Obj: vlanClusterNetwork, Check: crdschema.WantField("spec.ipam.routes", []any{map[string]any{"dst": "0.0.0.0/0"}})},
	{Name: "vxlan, port defaults to 4789", Obj: vxlanClusterNetwork, Check: crdschema.WantField("spec.defaultOptions.vxlan.port", 4789)},
	{Name: "vxlan with local and multicast group", Obj: edit(vxlanClusterNetwork, `{master: eth0, remotes: [192.0.2.1, "2001:db8::1"], learning: false}`, `{local: 192.0.2.10, group: 239.1.1.1, port: 8472, mtu: 1450}`)},
	{Name: "vxlan with an IPv6 multicast group", Obj: edit(vxlanClusterNetwork, `remotes: [192.0.2.1, "2001:db8::1"]`, `group: "ff05::1:3"`)},
	{Name: "type only", Obj: edit(vlanClusterNetwork, "  defaultOptions:\n    vlan: {master: eth1, mtu: 1500}\n", "")},
	{Name: "unknown type", Obj: edit(vlanClusterNetwork, "type: netclass-vlan", "type: netclass-bridge"), WantErr: `spec.type: Unsupported value: "netclass-bridge"`},
	{Name: "type missing", Obj: edit(vlanClusterNetwork, "  type: netclass-vlan\n", ""), WantErr: "spec.type: Required value"},
	{Name: "vxlan options on a vlan network", Obj: edit(vlanClusterNetwork, "vlan: {master: eth1, mtu: 1500}", "vxlan: {master: eth1}"), WantErr: "spec: Invalid value: *defaultOptions must match type"},
	{Name: "vlan options on a vxlan network", Obj: edit(vxlanClusterNetwork, `vxlan: {master: eth0, remotes: [192.0.2.1, "2001:db8::1"], learning: false}`, "vlan: {master: eth0}"), WantErr: "spec: Invalid value: *defaultOptions must match type"},
	{Name: "vlan and vxlan options", Obj: edit(vlanClusterNetwork, "vlan: {master: eth1, mtu: 1500}", "vlan: {master: eth1}\n    vxlan: {master: eth1}"), WantErr: "at most one of vlan and vxlan may be set"},
	{Name: "master and local", Obj: edit(vxlanClusterNetwork, "master: eth0,", "master: eth0, local: 192.0.2.10,"), WantErr: "spec.defaultOptions.vxlan: Invalid value: *master and local are mutually exclusive"},
	{Name: "group and remotes", Obj: edit(vxlanClusterNetwork, "master: eth0,", "master: eth0, group: 239.1.1.1,"), WantErr: "spec.defaultOptions.vxlan: Invalid value: *group and remotes are mutually exclusive"},
	{Name: "unicast group", Obj: edit(vxlanClusterNetwork, `remotes: [192.0.2.1, "2001:db8::1"]`, "group: 192.0.2.1"), WantErr: "spec.defaultOptions.vxlan.group: Invalid value: *group must be a multicast address"},
	{Name: "remote not an IP", Obj: edit(vxlanClusterNetwork, "192.0.2.1,", "192.0.2.300,"), WantErr: "spec.defaultOptions.vxlan.remotes[0]: Invalid value: *must be a valid IP address"},
	{Name: "remote with a mask", Obj: edit(vxlanClusterNetwork, "192.0.2.1,", "192.0.2.0/24,"), WantErr: "spec.defaultOptions.vxlan.remotes[0]: Invalid value: *must be a valid IP address"},
	{Name: "remotes repeated", Obj: edit(vxlanClusterNetwork, `"2001:db8::1"`, "192.0.2.1"), WantErr: "spec.defaultOptions.vxlan.remotes[1]: Duplicate value"},
	{Name: "port 0", Obj: edit(vxlanClusterNetwork, "learning: false", "learning: false, port: 0"), WantErr: "spec.defaultOptions.vxlan.port: Invalid value: 0"},
	{Name: "port 65536", Obj: edit(vxlanClusterNetwork, "learning: false", "learning: false, port: 65536"), WantErr: "spec.defaultOptions.vxlan.port: Invalid value: 65536"},
	{Name: "mtu 67", Obj: edit(vlanClusterNetwork, "mtu: 1500", "mtu: 67"), WantErr: "spec.defaultOptions.vlan.mtu: Invalid value: 67"},
	{Name: "master with a slash", Obj: edit(vlanClusterNetwork, "master: eth1", "master: eth/1"), WantErr: "spec.defaultOptions.vlan.master: Invalid value"},
	{Name: "master of 16 characters", Obj: edit(vlanClusterNetwork, "master: eth1", "master: abcdefghijklmnop"), WantErr: "spec.defaultOptions.vlan.master: Too long"},
	{Name: "master '..'", Obj: edit(vlanClusterNetwork, "master: eth1", `master: ".."`), WantErr: "spec.defaultOptions.vlan.master: Invalid value: *must be a valid interface name"},
	{Name: "rate without burst", Obj: edit(vlanClusterNetwork, "egressRate: 1000000, egressBurst: 10000", "egressRate: 1000000"), WantErr: "spec.qos: Invalid value: *egressRate and egressBurst must be set together"},
	{Name: "ingress burst without rate", Obj: edit(vlanClusterNetwork, "dscp: 10", "dscp: 10, ingressBurst: 5"), WantErr: "spec.qos: Invalid value: *ingressRate and ingressBurst must be set together"},
	{Name: "dscp 64", Obj: edit(vlanClusterNetwork, "dscp: 10", "dscp: 64"), WantErr: "spec.qos.dscp: Invalid value: 64"},
	{Name: "queue", Obj: edit(vlanClusterNetwork, "dscp: 10", "dscp: 10, queue: cake"), Check: crdschema.WantField("spec.qos.queue", "cake")},
	{Name: "unknown queue", Obj: edit(vlanClusterNetwork, "dscp: 10", "dscp: 10, queue: pfifo"), WantErr: `spec.qos.queue: Unsupported value: "pfifo"`},
	{Name: "pcpMap", Obj: edit(vlanClusterNetwork, "mtu: 1500}", `mtu: 1500, pcpMap: {"46": 6, "0": 0, "63": 7}}`), Check: crdschema.WantField("spec.defaultOptions.vlan.pcpMap", map[string]any{"46": 6, "0": 0, "63": 7})},
	{Name: "pcpMap key not a DSCP", Obj: edit(vlanClusterNetwork, "mtu: 1500}", `mtu: 1500, pcpMap: {"64": 1}}`), WantErr: "keys must be DSCP values"},
	{Name: "pcpMap key with a leading zero", Obj: edit(vlanClusterNetwork, "mtu: 1500}", `mtu: 1500, pcpMap: {"046": 1}}`), WantErr: "keys must be DSCP values"},
	{Name: "pcpMap value not a PCP", Obj: edit(vlanClusterNetwork, "mtu: 1500}", `mtu: 1500, pcpMap: {"46": 8}}`), WantErr: "values must be PCPs, from 0 to 7"},
	{Name: "pcpMap of 65 entries", Obj: edit(vlanClusterNetwork, "mtu: 1500}", "mtu: 1500, pcpMap: {"+pcpEntries(65)+"}}"), WantErr: "must have at most 64 items"},
	{Name: "pcpMap of 64 entries", Obj: edit(vlanClusterNetwork, "mtu: 1500}", "mtu: 1500, pcpMap: {"+pcpEntries(64)+"}}")},
	{Name: "bandwidth", Obj: edit(vlanClusterNetwork, "dscp: 10}", `dscp: 10}
  bandwidth: {capacity: 100M, default: 10M, min: 1M, max: 50M, step: 1M}`), Check: crdschema.WantField("spec.bandwidth.capacity", "100M")},
	{Name: "bandwidth as an integer", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  bandwidth: {capacity: 1000000000}"), Check: crdschema.WantField("spec.bandwidth.capacity", 1000000000)},
	{Name: "bandwidth capacity 0", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  bandwidth: {capacity: 0}"), WantErr: "spec.bandwidth.capacity: Invalid value: *capacity must be a positive quantity"},
	{Name: "bandwidth negative min", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  bandwidth: {capacity: 1G, min: -1M}"), WantErr: "spec.bandwidth.min: Invalid value: *min must not be negative"},
	{Name: "bandwidth not a quantity", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  bandwidth: {capacity: 1Gbit}"), WantErr: "spec.bandwidth.capacity: Invalid value"},
	{Name: "bandwidth min over max", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  bandwidth: {capacity: 1G, min: 20M, max: 10M}"), WantErr: "spec.bandwidth: Invalid value: *min must not exceed max"},
	{Name: "bandwidth max over capacity", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  bandwidth: {capacity: 100M, max: 1G}"), WantErr: "spec.bandwidth: Invalid value: *max must not exceed capacity"},
	{Name: "dscpPolicy", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  dscpPolicy: {allowed: [{first: 0, last: 40}, {first: 46, last: 46}]}"), Check: crdschema.WantField("spec.dscpPolicy.allowed", []any{map[string]any{"first": 0, "last": 40}, map[string]any{"first": 46, "last": 46}})},
	{Name: "dscpPolicy remark inside", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  dscpPolicy: {allowed: [{first: 8, last: 15}], remark: 8}"), Check: crdschema.WantField("spec.dscpPolicy.remark", 8)},
	{Name: "dscpPolicy without 0 or remark", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  dscpPolicy: {allowed: [{first: 8, last: 15}]}"), WantErr: "spec.dscpPolicy: Invalid value: *remark must be an allowed value"},
	{Name: "dscpPolicy remark outside", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  dscpPolicy: {allowed: [{first: 0, last: 40}], remark: 46}"), WantErr: "remark must be an allowed value"},
	{Name: "dscpPolicy empty", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  dscpPolicy: {allowed: []}"), WantErr: "spec.dscpPolicy.allowed: Invalid value: 0: spec.dscpPolicy.allowed in body should have at least 1 items"},
	{Name: "dscpPolicy range reversed", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  dscpPolicy: {allowed: [{first: 0, last: 40}, {first: 50, last: 47}]}"), WantErr: "spec.dscpPolicy.allowed[1]: Invalid value: *last must not be below first"},
	{Name: "dscpPolicy value 64", Obj: edit(vlanClusterNetwork, "dscp: 10}", "dscp: 10}\n  dscpPolicy: {allowed: [{first: 0, last: 64}]}"), WantErr: "spec.dscpPolicy.allowed[0].last: Invalid value: 64"},
	{Name: "name of 64 characters", Obj: edit(vlanClusterNetwork, "name: apitest-vlan", "name: apitest-"+strings.Repeat("a", 56)), WantErr: "ClusterNetwork names are at most 63 characters"},
	{Name: "name of 63 characters", Obj: edit(vlanClusterNetwork, "name: apitest-vlan", "name: apitest-"+strings.Repeat("a", 55))},
	{Name: "type immutable", Old: vxlanClusterNetwork, Obj: edit(vxlanClusterNetwork, "type: netclass-vxlan\n  defaultOptions:\n    vxlan: {master: eth0, remotes: [192.0.2.1, \"2001:db8::1\"], learning: false}", "type: netclass-vlan"), WantErr: "spec.type: Invalid value: *type is immutable"},
	{Name: "options may change", Old: vlanClusterNetwork, Obj: edit(vlanClusterNetwork, "master: eth1", "master: eth2"), Check: crdschema.WantField("spec.defaultOptions.vlan.master", "eth2")},
	{
		Name: "status counts and condition", Old: vlanClusterNetwork, Status: true,
		Obj:   vlanClusterNetwork + "status:\n  nodes: 3\n  readyNodes: 2\n  observedGeneration: 1\n  conditions:\n  - {type: Ready, status: \"True\", reason: Ready, message: \"2 of 3 nodes\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}\n",
		Check: crdschema.WantField("status.readyNodes", 2),
	},
}

// --- NodeNetwork -------------------------------------------------------------------------------

const nodeNetwork = `
apiVersion: netclass.dev/v1alpha1
kind: NodeNetwork
metadata: {name: apitest-vxlan.node-1}
spec:
  clusterNetworkName: apitest-vxlan
  nodeName: node-1
  options:
    vxlan: {local: 192.0.2.11, remotes: [192.0.2.12, 192.0.2.13]}
`

var nodeNetworkCases = []crdschema.Case{
	{Name: "valid", Obj: nodeNetwork, Check: crdschema.WantField("spec.options.vxlan.port", 4789)},
	{Name: "nodeName missing", Obj: edit(nodeNetwork, "  nodeName: node-1\n", ""), WantErr: "spec.nodeName: Required value"},
	{Name: "clusterNetworkName missing", Obj: edit(nodeNetwork, "  clusterNetworkName: apitest-vxlan\n", ""), WantErr: "spec.clusterNetworkName: Required value"},
	{Name: "nodeName immutable", Old: nodeNetwork, Obj: edit(nodeNetwork, "nodeName: node-1", "nodeName: node-2"), WantErr: "spec.nodeName: Invalid value: *nodeName is immutable"},
	{Name: "clusterNetworkName immutable", Old: nodeNetwork, Obj: edit(nodeNetwork, "clusterNetworkName: apitest-vxlan", "clusterNetworkName: other"), WantErr: "spec.clusterNetworkName: Invalid value: *clusterNetworkName is immutable"},
	{Name: "options may change", Old: nodeNetwork, Obj: edit(nodeNetwork, "local: 192.0.2.11", "local: 192.0.2.21"), Check: crdschema.WantField("spec.options.vxlan.local", "192.0.2.21")},
	{
		Name: "status from the node daemon", Old: nodeNetwork, Status: true,
		Obj:   nodeNetwork + "status:\n  master: eth0\n  localAddress: 192.0.2.11\n  mtu: 1450\n  conditions:\n  - {type: Ready, status: \"False\", reason: MasterNotFound, message: \"no device eth0\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}\n",
		Check: crdschema.WantField("status.localAddress", "192.0.2.11"),
	},
	{
		Name: "status with a bad local address", Old: nodeNetwork, Status: true,
		Obj:     nodeNetwork + "status:\n  localAddress: node-1\n",
		WantErr: "status.localAddress: Invalid value: *must be a valid IP address",
	},
}

// --- Network -----------------------------------------------------------------------------------

const vlanNetwork = `
apiVersion: netclass.dev/v1alpha1
kind: Network
metadata: {name: apitest-red, namespace: default}
spec:
  clusterNetworkName: apitest-vlan
  vlanId: 100
  ipam: {type: static, addresses: [{address: 10.1.0.5/24}]}
  qos: {ingressRate: 5000000, ingressBurst: 50000}
`

const vxlanNetwork = `
apiVersion: netclass.dev/v1alpha1
kind: Network
metadata: {name: apitest-green, namespace: default}
spec:
  clusterNetworkName: apitest-vxlan
  vni: 5001
  mtu: 1400
`

var networkCases = []crdschema.Case{
	{Name: "vlan", Obj: vlanNetwork, Check: crdschema.WantField("spec.ipam", map[string]any{"type": "static", "addresses": []any{map[string]any{"address": "10.1.0.5/24"}}})},
	{Name: "vxlan", Obj: vxlanNetwork},
	{Name: "vlanId 1", Obj: edit(vlanNetwork, "vlanId: 100", "vlanId: 1")},
	{Name: "vlanId 4094", Obj: edit(vlanNetwork, "vlanId: 100", "vlanId: 4094")},
	{Name: "vlanId 0", Obj: edit(vlanNetwork, "vlanId: 100", "vlanId: 0"), WantErr: "spec.vlanId: Invalid value: 0"},
	{Name: "vlanId 4095", Obj: edit(vlanNetwork, "vlanId: 100", "vlanId: 4095"), WantErr: "spec.vlanId: Invalid value: 4095"},
	{Name: "vni 16777215", Obj: edit(vxlanNetwork, "vni: 5001", "vni: 16777215")},
	{Name: "vni 0", Obj: edit(vxlanNetwork, "vni: 5001", "vni: 0"), WantErr: "spec.vni: Invalid value: 0"},
	{Name: "vni 16777216", Obj: edit(vxlanNetwork, "vni: 5001", "vni: 16777216"), WantErr: "spec.vni: Invalid value: 16777216"},
	{Name: "vlanId and vni", Obj: edit(vlanNetwork, "vlanId: 100", "vlanId: 100\n  vni: 100"), WantErr: "spec: Invalid value: *exactly one of vlanId (netclass-vlan) and vni (netclass-vxlan) must be set"},
	{Name: "neither vlanId nor vni", Obj: edit(vlanNetwork, "  vlanId: 100\n", ""), WantErr: "spec: Invalid value: *exactly one of vlanId"},
	{Name: "clusterNetworkName missing", Obj: edit(vxlanNetwork, "  clusterNetworkName: apitest-vxlan\n", ""), WantErr: "spec.clusterNetworkName: Required value"},
	{Name: "mtu 65536", Obj: edit(vxlanNetwork, "mtu: 1400", "mtu: 65536"), WantErr: "spec.mtu: Invalid value: 65536"},
	{Name: "qos rate without burst", Obj: edit(vlanNetwork, "ingressRate: 5000000, ingressBurst: 50000", "ingressRate: 5000000"), WantErr: "spec.qos: Invalid value: *ingressRate and ingressBurst must be set together"},
	{Name: "unknown field", Obj: edit(vxlanNetwork, "vni: 5001", "vni: 5001\n  vid: 7"), WantErr: `unknown field "spec.vid"`},
	{Name: "vlanId immutable", Old: vlanNetwork, Obj: edit(vlanNetwork, "vlanId: 100", "vlanId: 101"), WantErr: "spec.vlanId: Invalid value: *vlanId is immutable"},
	{Name: "vni immutable", Old: vxlanNetwork, Obj: edit(vxlanNetwork, "vni: 5001", "vni: 5002"), WantErr: "spec.vni: Invalid value: *vni is immutable"},
	{Name: "vlanId replaced by vni", Old: vlanNetwork, Obj: edit(vlanNetwork, "vlanId: 100", "vni: 100"), WantErr: "spec: Invalid value: *vlanId and vni cannot be added or removed"},
	{Name: "clusterNetworkName immutable", Old: vlanNetwork, Obj: edit(vlanNetwork, "clusterNetworkName: apitest-vlan", "clusterNetworkName: other"), WantErr: "spec.clusterNetworkName: Invalid value: *clusterNetworkName is immutable"},
	{Name: "mtu, ipam and qos may change", Old: vxlanNetwork, Obj: edit(vxlanNetwork, "mtu: 1400", "mtu: 1300\n  ipam: {type: dhcp}\n  qos: {dscp: 46}"), Check: crdschema.WantField("spec.qos.dscp", 46)},
	{
		Name: "status with the rendered config", Old: vxlanNetwork, Status: true,
		Obj: vxlanNetwork + `status:
  type: netclass-vxlan
  observedGeneration: 1
  config: {type: netclass-vxlan, vni: 5001, mtu: 1400, ipam: {type: host-local, ranges: [[{subnet: 10.51.0.0/16}]]}}
  conditions:
  - {type: Ready, status: "True", reason: Ready, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
`,
		Check: crdschema.WantField("status.config.ipam.ranges", []any{[]any{map[string]any{"subnet": "10.51.0.0/16"}}}),
	},
}

// --- NetworkQoS --------------------------------------------------------------------------------

const networkQoS = `
apiVersion: netclass.dev/v1alpha1
kind: NetworkQoS
metadata: {name: apitest-qos, namespace: default}
spec:
  podSelector: {matchLabels: {app: video}}
  priority: 10
  egress:
  - dscp: 34
    classifier:
      to:
      - ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}
      ports:
      - {protocol: UDP, port: 5004}
    bandwidth: {rate: 20000, burst: 2000}
`

// rule is a one-line egress rule for building rule lists.
const rule = "  - {dscp: 1}\n"

func qosWithRules(n int) string {
	return edit(networkQoS, `  - dscp: 34
    classifier:
      to:
      - ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}
      ports:
      - {protocol: UDP, port: 5004}
    bandwidth: {rate: 20000, burst: 2000}
`, strings.Repeat(rule, n))
}

func qosWithTo(to string) string {
	return edit(networkQoS, "      - ipBlock: {cidr: 10.0.0.0/8, except: [10.1.0.0/16]}\n", to)
}

const withNetworkSelectors = "  networkSelectors:\n  - {networkSelectionType: Networks, networkSelector: {matchLabels: {qos: video}}}\n  podSelector:"

var networkQoSCases = []crdschema.Case{
	{Name: "valid", Obj: networkQoS},
	{Name: "priority 0", Obj: edit(networkQoS, "priority: 10", "priority: 0")},
	{Name: "priority 100", Obj: edit(networkQoS, "priority: 10", "priority: 100")},
	{Name: "priority 101", Obj: edit(networkQoS, "priority: 10", "priority: 101"), WantErr: "spec.priority: Invalid value: 101"},
	{Name: "priority -1", Obj: edit(networkQoS, "priority: 10", "priority: -1"), WantErr: "spec.priority: Invalid value: -1"},
	{Name: "priority missing", Obj: edit(networkQoS, "  priority: 10\n", ""), WantErr: "spec.priority: Required value"},
	{Name: "egress missing", Obj: qosWithRules(0), WantErr: "spec.egress: Required value"},
	{Name: "20 rules", Obj: qosWithRules(20)},
	{Name: "21 rules", Obj: qosWithRules(21), WantErr: "spec.egress: Too many: 21: must have at most 20 items"},
	{Name: "rule without classifier or bandwidth", Obj: qosWithRules(1)},
	{Name: "dscp 63", Obj: edit(networkQoS, "dscp: 34", "dscp: 63")},
	{Name: "dscp 64", Obj: edit(networkQoS, "dscp: 34", "dscp: 64"), WantErr: "spec.egress[0].dscp: Invalid value: 64"},
	{Name: "dscp missing", Obj: edit(qosWithRules(1), "{dscp: 1}", "{bandwidth: {rate: 1}}"), WantErr: "spec.egress[0].dscp: Required value"},
	{Name: "ipBlock and podSelector", Obj: qosWithTo("      - {ipBlock: {cidr: 10.0.0.0/8}, podSelector: {}}\n"), WantErr: "spec.egress[0].classifier.to[0]: Invalid value: *Can't specify both podSelector/namespaceSelector and ipBlock"},
	{Name: "ipBlock and namespaceSelector", Obj: qosWithTo("      - {ipBlock: {cidr: 10.0.0.0/8}, namespaceSelector: {matchLabels: {a: b}}}\n"), WantErr: "spec.egress[0].classifier.to[0]: Invalid value: *Can't specify both podSelector/namespaceSelector and ipBlock"},
	{Name: "podSelector and namespaceSelector", Obj: qosWithTo("      - {podSelector: {matchLabels: {app: cdn}}, namespaceSelector: {matchLabels: {team: media}}}\n")},
	{Name: "empty podSelector selects all pods", Obj: qosWithTo("      - {podSelector: {}}\n")},
	{Name: "empty destination", Obj: qosWithTo("      - {}\n"), WantErr: "spec.egress[0].classifier.to[0]: Invalid value: *one of ipBlock, podSelector or namespaceSelector must be specified"},
	{Name: "IPv6 ipBlock", Obj: qosWithTo("      - ipBlock: {cidr: \"2001:db8::/32\", except: [\"2001:db8:1::/48\"]}\n")},
	{Name: "ipBlock cidr invalid", Obj: qosWithTo("      - ipBlock: {cidr: 10.0.0.0/33}\n"), WantErr: "spec.egress[0].classifier.to[0].ipBlock.cidr: Invalid value: *must be a valid CIDR"},
	{Name: "ipBlock cidr missing", Obj: qosWithTo("      - ipBlock: {except: [10.1.0.0/16]}\n"), WantErr: "spec.egress[0].classifier.to[0].ipBlock.cidr: Required value"},
	{Name: "except outside cidr", Obj: qosWithTo("      - ipBlock: {cidr: 10.0.0.0/8, except: [192.168.0.0/16]}\n"), WantErr: "spec.egress[0].classifier.to[0].ipBlock: Invalid value: *every except must be a strict subnet of cidr"},
	{Name: "except equal to cidr", Obj: qosWithTo("      - ipBlock: {cidr: 10.0.0.0/8, except: [10.0.0.0/8]}\n"), WantErr: "every except must be a strict subnet of cidr"},
	{Name: "protocol ICMP", Obj: edit(networkQoS, "protocol: UDP", "protocol: ICMP"), WantErr: `spec.egress[0].classifier.ports[0].protocol: Unsupported value: "ICMP"`},
	{Name: "protocol lower case", Obj: edit(networkQoS, "protocol: UDP", "protocol: udp"), WantErr: `spec.egress[0].classifier.ports[0].protocol: Unsupported value: "udp"`},
	{Name: "protocol without port", Obj: edit(networkQoS, "{protocol: UDP, port: 5004}", "{protocol: SCTP}")},
	{Name: "empty port entry", Obj: edit(networkQoS, "{protocol: UDP, port: 5004}", "{}"), WantErr: "spec.egress[0].classifier.ports[0]: Invalid value: *a port entry needs protocol"},
	{Name: "port without protocol", Obj: edit(networkQoS, "{protocol: UDP, port: 5004}", "{port: 5004}"), WantErr: "spec.egress[0].classifier.ports[0]: Invalid value: *port needs protocol to be specified"},
	{Name: "port 0", Obj: edit(networkQoS, "port: 5004", "port: 0"), WantErr: "spec.egress[0].classifier.ports[0].port: Invalid value: 0"},
	{Name: "port 65536", Obj: edit(networkQoS, "port: 5004", "port: 65536"), WantErr: "spec.egress[0].classifier.ports[0].port: Invalid value: 65536"},
	{Name: "rate only", Obj: edit(networkQoS, "{rate: 20000, burst: 2000}", "{rate: 20000}")},
	{Name: "burst without rate", Obj: edit(networkQoS, "{rate: 20000, burst: 2000}", "{burst: 2000}"), WantErr: "spec.egress[0].bandwidth: Invalid value: *burst needs rate to be specified"},
	{Name: "rate 4294967295", Obj: edit(networkQoS, "rate: 20000", "rate: 4294967295")},
	{Name: "burst 34359738", Obj: edit(networkQoS, "burst: 2000", "burst: 34359738")},
	{Name: "burst over the meter's", Obj: edit(networkQoS, "burst: 2000", "burst: 34359739"), WantErr: "spec.egress[0].bandwidth.burst: Invalid value: 34359739"},
	{Name: "rate 4294967296", Obj: edit(networkQoS, "rate: 20000", "rate: 4294967296"), WantErr: "spec.egress[0].bandwidth.rate: Invalid value: 4294967296"},
	{Name: "rate 0", Obj: edit(networkQoS, "rate: 20000", "rate: 0"), WantErr: "spec.egress[0].bandwidth.rate: Invalid value: 0"},
	{Name: "network selectors", Obj: edit(networkQoS, "  podSelector:", withNetworkSelectors)},
	{Name: "PodNetworks selection", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: PodNetworks, podNetworkSelector: {}}\n  podSelector:")},
	{Name: "PodNetworks selection without its selector", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: PodNetworks, networkSelector: {}}\n  podSelector:"), WantErr: "spec.networkSelectors[0]: Invalid value: *podNetworkSelector is required for PodNetworks"},
	{Name: "DefaultNetwork selection", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: DefaultNetwork}\n  podSelector:")},
	{Name: "DefaultNetwork with a selector", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: DefaultNetwork, networkSelector: {}}\n  podSelector:"), WantErr: "spec.networkSelectors[0]: Invalid value: *podNetworkSelector is required for PodNetworks, networkSelector for Networks and networkAttachmentDefinitionSelector for NetworkAttachmentDefinitions, and only that one; DefaultNetwork takes none"},
	{Name: "all three selection types", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: DefaultNetwork}\n  - {networkSelectionType: PodNetworks, podNetworkSelector: {}}\n  - {networkSelectionType: Networks, networkSelector: {}}\n  podSelector:")},
	{Name: "NetworkAttachmentDefinitions selection", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: NetworkAttachmentDefinitions, networkAttachmentDefinitionSelector: {namespaceSelector: {}, networkSelector: {matchLabels: {name: ovn-storage}}}}\n  podSelector:")},
	{Name: "NetworkAttachmentDefinitions without its selector", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: NetworkAttachmentDefinitions}\n  podSelector:"), WantErr: "spec.networkSelectors[0]: Invalid value: *networkAttachmentDefinitionSelector for NetworkAttachmentDefinitions"},
	{Name: "NetworkAttachmentDefinitions with another type's selector", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: NetworkAttachmentDefinitions, networkSelector: {}}\n  podSelector:"), WantErr: "spec.networkSelectors[0]: Invalid value: *networkAttachmentDefinitionSelector for NetworkAttachmentDefinitions"},
	{Name: "NAD selector on Networks", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: Networks, networkSelector: {}, networkAttachmentDefinitionSelector: {namespaceSelector: {}, networkSelector: {}}}\n  podSelector:"), WantErr: "spec.networkSelectors[0]: Invalid value: *podNetworkSelector is required"},
	{Name: "NAD selector without namespaceSelector", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: NetworkAttachmentDefinitions, networkAttachmentDefinitionSelector: {networkSelector: {}}}\n  podSelector:"), WantErr: "spec.networkSelectors[0].networkAttachmentDefinitionSelector.namespaceSelector: Required value"},
	{Name: "all four selection types", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: DefaultNetwork}\n  - {networkSelectionType: PodNetworks, podNetworkSelector: {}}\n  - {networkSelectionType: Networks, networkSelector: {}}\n  - {networkSelectionType: NetworkAttachmentDefinitions, networkAttachmentDefinitionSelector: {namespaceSelector: {}, networkSelector: {}}}\n  podSelector:")},
	{Name: "selection type repeated", Obj: edit(networkQoS, "  podSelector:", "  networkSelectors:\n  - {networkSelectionType: Networks, networkSelector: {}}\n  - {networkSelectionType: Networks, networkSelector: {matchLabels: {a: b}}}\n  podSelector:"), WantErr: "spec.networkSelectors[1]: Duplicate value"},
	{Name: "network selectors may be set once on an object without", Old: networkQoS, Obj: edit(networkQoS, "  podSelector:", withNetworkSelectors)},
	{Name: "network selectors immutable", Old: edit(networkQoS, "  podSelector:", withNetworkSelectors), Obj: edit(networkQoS, "  podSelector:", strings.Replace(withNetworkSelectors, "qos: video", "qos: audio", 1)), WantErr: "spec.networkSelectors: Invalid value: *networkSelectors is immutable"},
	{Name: "rules and priority may change", Old: networkQoS, Obj: edit(edit(networkQoS, "dscp: 34", "dscp: 46"), "priority: 10", "priority: 11"), Check: crdschema.WantField("spec.priority", 11)},
	{
		Name: "status", Old: networkQoS, Status: true,
		Obj:   networkQoS + "status:\n  status: NetworkQoS applied\n  conditions:\n  - {type: Ready, status: \"True\", reason: Applied, message: \"\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}\n",
		Check: crdschema.WantField("status.status", "NetworkQoS applied"),
	},
}
