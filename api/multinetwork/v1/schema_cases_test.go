package v1_test

import (
	"os"
	"strings"
	"testing"

	"github.com/netclass-dev/netclass/api/internal/crdschema"
)

// The schema cases run offline against the CRD manifests (schema_test.go)
// and, with the testbed build tag, against a real API server
// (testbed_test.go). Object names start with "apitest-" so the live run
// cannot collide with anything else in the cluster.

// seedCases are the verbatim seed examples: they must be accepted with
// strict field validation, their parameters kept to the last value, and
// their status (output only) dropped on create.
func seedCases(t *testing.T) []crdschema.Case {
	t.Helper()
	var cases []crdschema.Case
	for _, sd := range seedDocs {
		path := testdata(t, sd.file)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := crdschema.ReadDocs(path)
		if err != nil {
			t.Fatal(err)
		}
		fs := []func(testing.TB, map[string]any){crdschema.WantField("spec", docs[0].Object["spec"]), crdschema.WantNoField("status")}
		if params, ok := crdschema.Nested(docs[0].Object, "spec", "parameters"); ok {
			fs = append(fs, crdschema.WantField("spec.parameters", params))
		}
		cases = append(cases, crdschema.Case{Name: "seed/" + sd.file, Obj: string(raw), Check: crdschema.All(fs...)})
	}
	return cases
}

const networkClass = `
apiVersion: multinetwork.networking.k8s.io/v1
kind: NetworkClass
metadata: {name: apitest-nc}
spec: {group: netclass.dev, version: v1alpha1, kind: Network}
`

func networkClassWith(spec string) string {
	return strings.Replace(networkClass, "spec: {group: netclass.dev, version: v1alpha1, kind: Network}", "spec: "+spec, 1)
}

var networkClassCases = []crdschema.Case{
	{Name: "valid", Obj: networkClass},
	{Name: "core group is the empty string", Obj: networkClassWith(`{group: "", version: v1, kind: ConfigMap}`)},
	{Name: "kind missing", Obj: networkClassWith(`{group: netclass.dev, version: v1alpha1}`), WantErr: "spec.kind: Required value"},
	{Name: "version missing", Obj: networkClassWith(`{group: netclass.dev, kind: Network}`), WantErr: "spec.version: Required value"},
	{Name: "group not a DNS subdomain", Obj: networkClassWith(`{group: Netclass.Dev, version: v1alpha1, kind: Network}`), WantErr: "spec.group: Invalid value"},
	{Name: "version with upper case", Obj: networkClassWith(`{group: netclass.dev, version: V1, kind: Network}`), WantErr: "spec.version: Invalid value"},
	{Name: "kind with a space", Obj: networkClassWith(`{group: netclass.dev, version: v1, kind: "Net work"}`), WantErr: "spec.kind: Invalid value"},
	{Name: "unknown spec field", Obj: networkClassWith(`{group: netclass.dev, version: v1, kind: Network, engine: x}`), WantErr: `unknown field "spec.engine"`},
	{Name: "spec may change", Old: networkClass, Obj: networkClassWith(`{group: netclass.dev, version: v1beta1, kind: Network}`)},
	{
		Name: "status Accepted condition", Old: networkClass, Status: true,
		Obj: networkClass + `
status:
  conditions:
  - {type: Accepted, status: "True", reason: Accepted, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
`,
		Check: crdschema.WantField("status.conditions", []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}}),
	},
}

const podNetwork = `
apiVersion: multinetwork.networking.k8s.io/v1
kind: PodNetwork
metadata: {name: apitest-pn}
spec:
  enabled: true
  provider: example.net/apitest
  parameters: {type: netclass-bridge, bridge: blue0, ipam: {type: host-local, ranges: [[{subnet: 10.10.1.0/24}]]}}
`

func podNetworkWith(old, new string) string { return strings.Replace(podNetwork, old, new, 1) }

func conditions(n int) string {
	var b strings.Builder
	b.WriteString("status:\n  conditions:\n")
	for i := 0; i < n; i++ {
		b.WriteString(`  - {type: C` + string(rune('a'+i)) + `, status: "True", reason: R, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}` + "\n")
	}
	return b.String()
}

var podNetworkCases = []crdschema.Case{
	{
		Name: "valid, parameters kept", Obj: podNetwork,
		Check: crdschema.WantField("spec.parameters", map[string]any{"type": "netclass-bridge", "bridge": "blue0", "ipam": map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{"subnet": "10.10.1.0/24"}}}}}),
	},
	{Name: "enabled defaults to true", Obj: podNetworkWith("  enabled: true\n", ""), Check: crdschema.WantField("spec.enabled", true)},
	{Name: "netclass provider without a path", Obj: podNetworkWith("example.net/apitest", "netclass.dev")},
	{Name: "provider missing", Obj: podNetworkWith("  provider: example.net/apitest\n", ""), WantErr: "spec.provider: Required value"},
	{Name: "provider empty", Obj: podNetworkWith("example.net/apitest", `""`), WantErr: "spec.provider: Invalid value"},
	{Name: "provider too long", Obj: podNetworkWith("example.net/apitest", "example.net/"+strings.Repeat("p", 242)), WantErr: "spec.provider: Too long"},
	{Name: "parameters not an object", Obj: podNetworkWith("parameters: {type: netclass-bridge, bridge: blue0, ipam: {type: host-local, ranges: [[{subnet: 10.10.1.0/24}]]}}", "parameters: [1, 2]"), WantErr: "spec.parameters: Invalid value: *must be of type object"},
	{Name: "provider immutable", Old: podNetwork, Obj: podNetworkWith("example.net/apitest", "example.net/other"), WantErr: "spec.provider: Invalid value: *: Value is immutable"},
	{Name: "enabled may change", Old: podNetwork, Obj: podNetworkWith("enabled: true", "enabled: false"), Check: crdschema.WantField("spec.enabled", false)},
	{Name: "parameters may change", Old: podNetwork, Obj: podNetworkWith("bridge: blue0", "bridge: blue1"), Check: crdschema.WantField("spec.parameters.bridge", "blue1")},
	{Name: "create ignores status", Obj: podNetwork + conditions(1), Check: crdschema.WantNoField("status")},
	{Name: "status with five conditions", Old: podNetwork, Status: true, Obj: podNetwork + conditions(5)},
	{Name: "status with six conditions", Old: podNetwork, Status: true, Obj: podNetwork + conditions(6), WantErr: "status.conditions: Too many"},
	{
		Name: "status condition without reason", Old: podNetwork, Status: true,
		Obj:     podNetwork + "status:\n  conditions:\n  - {type: Ready, status: \"True\", message: \"\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}\n",
		WantErr: "status.conditions[0].reason: Required value",
	},
	{
		Name: "status condition with a bad status", Old: podNetwork, Status: true,
		Obj:     podNetwork + "status:\n  conditions:\n  - {type: Ready, status: \"Yes\", reason: R, message: \"\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}\n",
		WantErr: "status.conditions[0].status: Unsupported value",
	},
	{
		Name: "status conditions keyed by type", Old: podNetwork, Status: true,
		Obj: podNetwork + `status:
  conditions:
  - {type: Ready, status: "True", reason: R, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
  - {type: Ready, status: "False", reason: R, message: "", lastTransitionTime: "2026-01-01T00:00:00Z"}
`,
		WantErr: "status.conditions[1]: Duplicate value",
	},
	{
		Name: "empty status gets the default Ready=Unknown condition", Old: podNetwork, Status: true,
		Obj:   podNetwork + "status: {}\n",
		Check: crdschema.WantField("status.conditions", []any{map[string]any{"type": "Ready", "status": "Unknown", "reason": "Pending", "message": "Waiting for controller", "lastTransitionTime": "1970-01-01T00:00:00Z"}}),
	},
}
