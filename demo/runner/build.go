package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/containernetworking/cni/libcni"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/conf/demo"
	"github.com/netclass-dev/netclass/conf/netconf"
	"github.com/netclass-dev/netclass/demo/traffic"
)

// build creates the nodes, the underlay between them (a bridge in a "wire"
// namespace) and every pod with its attachment.
func (r *Runner) build(ctx context.Context) error {
	wire, err := traffic.CreateNS(Prefix + "wire")
	if err != nil {
		return err
	}
	r.nodes = map[string]*traffic.NS{"wire": wire}
	if err := run("ip", "-n", wire.Name, "link", "add", "wire0", "type", "bridge"); err != nil {
		return err
	}
	if err := run("ip", "-n", wire.Name, "link", "set", "wire0", "up"); err != nil {
		return err
	}
	for i, name := range r.S.Nodes {
		n, err := traffic.CreateNS(Prefix + name)
		if err != nil {
			return err
		}
		r.nodes[name] = n
		if err := plug(wire, n, fmt.Sprintf("p%d", i), r.S.Underlay[i]); err != nil {
			return fmt.Errorf("underlay of %s: %w", name, err)
		}
	}
	r.pods = map[string]*pod{}
	for _, spec := range r.S.Pods {
		if err := interrupted(ctx); err != nil {
			return err
		}
		if err := r.attach(ctx, spec); err != nil {
			return fmt.Errorf("attach %s: %w", spec.Name, err)
		}
	}
	return nil
}

// plug connects a node to the wire bridge with its underlay address.
func plug(wire, node *traffic.NS, port, addr string) error {
	steps := [][]string{
		{"ip", "-n", wire.Name, "link", "add", port, "type", "veth", "peer", "name", "under0", "netns", node.Name},
		{"ip", "-n", wire.Name, "link", "set", port, "master", "wire0", "up"},
		{"ip", "-n", node.Name, "addr", "add", addr, "dev", "under0"},
		{"ip", "-n", node.Name, "link", "set", "under0", "up"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) attach(ctx context.Context, spec demo.Pod) error {
	ns, err := traffic.CreateNS(Prefix + spec.Name)
	if err != nil {
		return err
	}
	p := &pod{spec: spec, ns: ns, node: r.nodes[spec.Node]}
	r.pods[spec.Name] = p
	if p.list, err = r.conflist(spec); err != nil {
		return err
	}
	p.rt = &libcni.RuntimeConf{ContainerID: "demo-" + spec.Name, NetNS: ns.Path, IfName: "net1",
		CapabilityArgs: map[string]any{}}
	if spec.Address != "" {
		p.rt.CapabilityArgs["ips"] = []string{spec.Address}
	}
	if spec.QoS != nil {
		p.rt.CapabilityArgs["qos"] = spec.QoS // the runtime's per-pod QoS, merged over the network's
	}
	return p.node.Run(func() error {
		res, err := r.cni.AddNetworkList(ctx, p.list, p.rt)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(res)
		var out struct {
			IPs []struct {
				Address string `json:"address"`
			} `json:"ips"`
		}
		json.Unmarshal(b, &out)
		if len(out.IPs) > 0 {
			p.addr = out.IPs[0].Address
		}
		return nil
	})
}

// conflist renders the pod's network for its node: netclass's state dirs
// per node (each node is its own machine), VXLAN remotes = the other nodes.
func (r *Runner) conflist(spec demo.Pod) (*libcni.NetworkConfigList, error) {
	var net demo.Network
	for _, n := range r.S.Networks {
		if n.Name == spec.Network {
			net = n
		}
	}
	rendered, err := netconf.RenderParameters(net.Name, contract.CNIVersion, net.Plugin)
	if err != nil {
		return nil, err
	}
	var plugin map[string]any
	if err := json.Unmarshal(rendered, &plugin); err != nil {
		return nil, err
	}
	nodeDir := filepath.Join(r.work, spec.Node)
	plugin["dataDir"] = filepath.Join(nodeDir, "netclass")
	plugin["capabilities"] = map[string]bool{"ips": true, "qos": true}
	if ipam, ok := plugin["ipam"].(map[string]any); ok && ipam["type"] == "host-local" {
		ipam["dataDir"] = filepath.Join(nodeDir, "ipam")
	}
	if plugin["type"] == netconf.TypeVXLAN {
		plugin["remotes"] = r.remotesOf(spec.Node)
	}
	delete(plugin, "cniVersion")
	delete(plugin, "name")
	b, err := json.Marshal(map[string]any{"cniVersion": contract.CNIVersion, "name": net.Name, "plugins": []any{plugin}})
	if err != nil {
		return nil, err
	}
	return libcni.ConfListFromBytes(b)
}

func (r *Runner) remotesOf(node string) []string {
	var out []string
	for i, n := range r.S.Nodes {
		if n != node {
			out = append(out, netip.MustParsePrefix(r.S.Underlay[i]).Addr().String())
		}
	}
	return out
}
