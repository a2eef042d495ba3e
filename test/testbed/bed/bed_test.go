package bed

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseEnv(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     map[string]string
		err      string
	}{
		{name: "plain, quoted, exported, comments",
			in:   "# c\n\nexport KUBECONFIG=/run/x/admin.kubeconfig\nNODES=\"a b c\"\n  EMPTY=\"\"\nBARE=\n",
			want: map[string]string{"KUBECONFIG": "/run/x/admin.kubeconfig", "NODES": "a b c", "EMPTY": "", "BARE": ""}},
		{name: "value with =", in: "HOST_PATHS=\"/a=/b /c=/d\"\n", want: map[string]string{"HOST_PATHS": "/a=/b /c=/d"}},
		{name: "no equals", in: "JUSTAWORD\n", err: "line 1"},
		{name: "empty key", in: "=x\n", err: "not KEY=value"},
		{name: "unbalanced quote", in: "A=ok\nB=\"open\n", err: "line 2: unbalanced"},
		{name: "inner quote", in: "B=\"a\"b\"\n", err: "unbalanced"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseEnv(strings.NewReader(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// node2 is an env file as nodes.sh writes it.
const node2 = `# Written by scripts/testbed
NODE_NAME="vm-n2"
NODE_INDEX="2"
NODE_IP="10.250.0.2"
UNDERLAY_IF="ul-n2"
UNDERLAY_ADDR="10.250.0.2/24"
NETNS="/run/netclass-testbed/ns/vm-n2.net"
MNTNS="/run/netclass-testbed/ns/vm-n2.mnt"
KUBELET_DIR="/var/lib/kubelet"
NRI_SOCKET="/var/run/nri/nri.sock"
CONTAINERD_SOCKET="/run/netclass-testbed/containerd/containerd.sock"
CNI_BIN_DIR="/opt/cni/bin"
CNI_CONF_DIR="/etc/cni/net.d"
POD_SUBNET="10.252.2.0/24"
POD_BRIDGE="nctb-pod"
POD_GATEWAY="10.252.2.1"
CGROUP_ROOT="/netclass-testbed/vm-n2"
LOG_DIR="/var/log/netclass-testbed/vm-n2"
HOST_PATHS="/var/lib/kubelet=/d/kubelet /run/nri=/s/nri /run/netclass-testbed/containerd=/s/containerd /var/lib/cni=/d/cni-state"
`

func parseNode(t *testing.T, text string) (Node, error) {
	t.Helper()
	env, err := ParseEnv(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return nodeFromEnv(env)
}

func TestNodeFromEnv(t *testing.T) {
	n, err := parseNode(t, node2)
	if err != nil {
		t.Fatal(err)
	}
	if n.Name != "vm-n2" || n.Index != 2 || n.IP != "10.250.0.2" || n.UnderlayIf != "ul-n2" || n.UnderlayAddr != "10.250.0.2/24" ||
		n.Primary() || n.NetNSPath() != "/run/netclass-testbed/ns/vm-n2.net" || n.PodSubnet != "10.252.2.0/24" || len(n.Binds) != 4 {
		t.Fatalf("parsed %+v", n)
	}
	for _, tc := range []struct{ name, drop, add, err string }{
		{name: "no NODE_IP", drop: "NODE_IP=", err: "no NODE_IP"},
		{name: "no UNDERLAY_IF", drop: "UNDERLAY_IF=", err: "no UNDERLAY_IF"},
		{name: "only one namespace", drop: "MNTNS=", err: "both be set or both empty"},
		{name: "bad index", drop: "NODE_INDEX=", add: `NODE_INDEX="two"`, err: "NODE_INDEX"},
		{name: "relative host path", drop: "HOST_PATHS=", add: `HOST_PATHS="/var/lib/kubelet=d/kubelet"`, err: "HOST_PATHS entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lines []string
			for _, l := range strings.Split(node2, "\n") {
				if !strings.HasPrefix(l, tc.drop) {
					lines = append(lines, l)
				}
			}
			_, err := parseNode(t, strings.Join(append(lines, tc.add), "\n"))
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestHostPath(t *testing.T) {
	n, err := parseNode(t, node2)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"/var/lib/kubelet":                        "/d/kubelet",
		"/var/lib/kubelet/plugins_registry":       "/d/kubelet/plugins_registry",
		"/var/lib/kubelet-other":                  "/var/lib/kubelet-other",
		"/var/run/nri/nri.sock":                   "/s/nri/nri.sock",
		"/run/nri/nri.sock":                       "/s/nri/nri.sock",
		"/run/netclass-testbed/containerd/x.sock": "/s/containerd/x.sock",
		"/run/netclass-testbed/env":               "/run/netclass-testbed/env",
		"/var/lib/cni/netclass-dra/networks/a":    "/d/cni-state/netclass-dra/networks/a",
		"/tmp/netclass-e2e-1/state":               "/tmp/netclass-e2e-1/state",
	} {
		if got := n.HostPath(in); got != want {
			t.Errorf("HostPath(%s) = %s, want %s", in, got, want)
		}
	}
	one := Node{Name: "vm"}
	if got := one.HostPath("/var/lib/kubelet"); got != "/var/lib/kubelet" {
		t.Errorf("node 1: HostPath = %s", got)
	}
}

func TestCommand(t *testing.T) {
	n, err := parseNode(t, node2)
	if err != nil {
		t.Fatal(err)
	}
	cmd := n.Command("ip", "-o", "addr")
	want := []string{"nsenter", "--net=/run/netclass-testbed/ns/vm-n2.net", "--mount=/run/netclass-testbed/ns/vm-n2.mnt", "--wd=.", "--", "ip", "-o", "addr"}
	if !reflect.DeepEqual(cmd.Args, want) {
		t.Errorf("node 2: %q, want %q", cmd.Args, want)
	}
	if got := (Node{Name: "vm"}).Command("ip", "-o", "addr").Args; !reflect.DeepEqual(got, []string{"ip", "-o", "addr"}) {
		t.Errorf("node 1: %q", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	node1 := strings.NewReplacer(`"vm-n2"`, `"vm"`, `NODE_INDEX="2"`, `NODE_INDEX="1"`, `NETNS="/run/netclass-testbed/ns/vm-n2.net"`, `NETNS=""`,
		`MNTNS="/run/netclass-testbed/ns/vm-n2.mnt"`, `MNTNS=""`).Replace(node2)
	write("nodes/vm.env", node1)
	write("nodes/vm-n2.env", node2)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not up") {
		t.Fatalf("no env file: %v", err)
	}
	write("env", "export KUBECONFIG=/x\nNETCLASS_TESTBED_NODES=\"vm vm-n2\"\n")
	b, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Names(); !reflect.DeepEqual(got, []string{"vm", "vm-n2"}) || !b.Nodes[0].Primary() || b.Env["KUBECONFIG"] != "/x" {
		t.Fatalf("loaded %v %+v", got, b)
	}
	if n, ok := b.Node("vm-n2"); !ok || n.Index != 2 {
		t.Fatalf("Node(vm-n2) = %+v, %v", n, ok)
	}
	for text, want := range map[string]string{
		"NETCLASS_TESTBED_NODES=\"vm vm-n3\"\n": "vm-n3.env",
		"NETCLASS_TESTBED_NODES=\"vm-n2 vm\"\n": "node 1 (vm-n2) has its own namespaces",
		"NETCLASS_TESTBED_NODES=\"\"\n":         "lists no nodes",
	} {
		write("env", text)
		if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("env %q: err %v, want one containing %q", text, err, want)
		}
	}
}
