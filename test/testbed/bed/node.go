package bed

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// Node is one node of the test bed: what its env file ($STATE_DIR/nodes/<name>.env) says.
// Paths are as the node sees them (run a command there with Command); HostPath finds them on
// this machine.
type Node struct {
	Name  string
	Index int
	// IP is the node's InternalIP, the address of its underlay interface UnderlayIf;
	// UnderlayAddr is that address with its prefix length.
	IP, UnderlayIf, UnderlayAddr string
	// NetNS and MntNS are the files of the node's network and mount namespaces; both empty
	// for node 1, which runs in this machine's namespaces.
	NetNS, MntNS                                                   string
	KubeletDir, NRISocket, ContainerdSocket, CNIBinDir, CNIConfDir string
	// PodSubnet is the node's primary pod network, on its bridge PodBridge, where the node
	// has the address PodGateway.
	PodSubnet, PodBridge, PodGateway string
	// CgroupRoot is the kubelet's cgroup root ("/" for node 1).
	CgroupRoot string
	// LogDir holds the node's kubelet.log and containerd.log.
	LogDir string
	// Binds are the node's bind mounts: a directory on the node and where it is on this
	// machine (none for node 1).
	Binds []Bind
}

// Bind is one of a node's bind mounts.
type Bind struct{ NodePath, HostPath string }

// LoadNode reads one node's env file.
func LoadNode(path string) (Node, error) {
	env, err := readEnvFile(path)
	if err != nil {
		return Node{}, err
	}
	n, err := nodeFromEnv(env)
	if err != nil {
		return Node{}, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

// nodeFromEnv turns a node's env file into a Node, checking the fields every node has.
func nodeFromEnv(env map[string]string) (Node, error) {
	n := Node{Name: env["NODE_NAME"], IP: env["NODE_IP"], UnderlayIf: env["UNDERLAY_IF"], UnderlayAddr: env["UNDERLAY_ADDR"],
		NetNS: env["NETNS"], MntNS: env["MNTNS"], KubeletDir: env["KUBELET_DIR"], NRISocket: env["NRI_SOCKET"],
		ContainerdSocket: env["CONTAINERD_SOCKET"], CNIBinDir: env["CNI_BIN_DIR"], CNIConfDir: env["CNI_CONF_DIR"],
		PodSubnet: env["POD_SUBNET"], PodBridge: env["POD_BRIDGE"], PodGateway: env["POD_GATEWAY"],
		CgroupRoot: env["CGROUP_ROOT"], LogDir: env["LOG_DIR"]}
	for key, v := range map[string]string{"NODE_NAME": n.Name, "NODE_IP": n.IP, "UNDERLAY_IF": n.UnderlayIf,
		"UNDERLAY_ADDR": n.UnderlayAddr, "KUBELET_DIR": n.KubeletDir, "NRI_SOCKET": n.NRISocket,
		"CONTAINERD_SOCKET": n.ContainerdSocket, "CNI_BIN_DIR": n.CNIBinDir, "CNI_CONF_DIR": n.CNIConfDir,
		"POD_SUBNET": n.PodSubnet} {
		if v == "" {
			return Node{}, fmt.Errorf("no %s", key)
		}
	}
	if (n.NetNS == "") != (n.MntNS == "") {
		return Node{}, fmt.Errorf("node %s: NETNS %q and MNTNS %q must both be set or both empty", n.Name, n.NetNS, n.MntNS)
	}
	idx, err := intValue(env, "NODE_INDEX")
	if err != nil {
		return Node{}, fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.Index = idx
	for _, pair := range strings.Fields(env["HOST_PATHS"]) {
		nodePath, hostPath, ok := strings.Cut(pair, "=")
		if !ok || !strings.HasPrefix(nodePath, "/") || !strings.HasPrefix(hostPath, "/") {
			return Node{}, fmt.Errorf("node %s: HOST_PATHS entry %q is not /node/path=/host/path", n.Name, pair)
		}
		n.Binds = append(n.Binds, Bind{NodePath: canonical(nodePath), HostPath: hostPath})
	}
	// the deepest bind first: it hides what a shallower one would map
	sort.SliceStable(n.Binds, func(i, j int) bool { return len(n.Binds[i].NodePath) > len(n.Binds[j].NodePath) })
	return n, nil
}

// Primary is true for node 1, the one in this machine's own namespaces.
func (n Node) Primary() bool { return n.NetNS == "" }

// NetNSPath is a path of the node's network namespace that setns accepts (node 1: this
// machine's, the one this process runs in).
func (n Node) NetNSPath() string {
	if n.Primary() {
		return "/proc/self/ns/net"
	}
	return n.NetNS
}

// HostPath is where a path of the node is on this machine: under the directory its mount
// namespace binds there, or the same path when no bind covers it (node 1: always).
func (n Node) HostPath(nodePath string) string {
	p := canonical(nodePath)
	for _, b := range n.Binds {
		if p == b.NodePath {
			return b.HostPath
		}
		if rest, ok := strings.CutPrefix(p, b.NodePath+"/"); ok {
			return b.HostPath + "/" + rest
		}
	}
	return nodePath
}

// canonical cleans a path and spells /var/run as /run (a symlink to it on the hosts the test
// bed runs on), so that /var/run/nri and /run/nri are one directory.
func canonical(p string) string {
	p = strings.TrimRight(p, "/")
	if rest, ok := strings.CutPrefix(p, "/var/run/"); ok || p == "/var/run" {
		return strings.TrimRight("/run/"+rest, "/")
	}
	return p
}

// Command is exec.Command running on the node: inside its network and mount namespaces
// (through nsenter, which execs the program: the process's PID is the program's), starting in
// the caller's working directory or cmd.Dir. On node 1 it is exec.Command itself.
func (n Node) Command(name string, args ...string) *exec.Cmd {
	return n.CommandContext(context.Background(), name, args...)
}

// CommandContext is Command with a context, as exec.CommandContext.
func (n Node) CommandContext(ctx context.Context, name string, args ...string) *exec.Cmd {
	if n.Primary() {
		return exec.CommandContext(ctx, name, args...)
	}
	return exec.CommandContext(ctx, "nsenter", n.nsenterArgs(name, args...)...)
}

// nsenterArgs are nsenter's arguments for running name on the node. --wd=. is opened before
// nsenter enters the namespaces, so the program starts in the directory nsenter started in.
func (n Node) nsenterArgs(name string, args ...string) []string {
	return append([]string{"--net=" + n.NetNS, "--mount=" + n.MntNS, "--wd=.", "--", name}, args...)
}

// Output runs a command on the node and returns its standard output; the error carries the
// standard error.
func (n Node) Output(ctx context.Context, name string, args ...string) (string, error) {
	cmd := n.CommandContext(ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s on node %s: %w: %s", name, strings.Join(args, " "), n.Name, err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Exists reports whether the node's namespaces are still persisted at NetNS and MntNS
// (node 1: always).
func (n Node) Exists() bool {
	if n.Primary() {
		return true
	}
	for _, f := range []string{n.NetNS, n.MntNS} {
		var st unix.Statfs_t
		if err := unix.Statfs(f, &st); err != nil || st.Type != unix.NSFS_MAGIC {
			return false
		}
	}
	return true
}
