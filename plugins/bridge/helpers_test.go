package bridge

import (
	"encoding/json"
	"net/netip"
	"os/exec"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
)

const plugin = "netclass-bridge"

// network is one netclass-bridge network of a test, with its own state dirs.
type network struct {
	conf map[string]any
}

// newNetwork returns a gateway bridge network on subnets (host-local IPAM);
// extra keys are merged over the defaults.
func newNetwork(t *testing.T, name, bridge string, subnets []string, extra map[string]any) *network {
	t.Helper()
	var ranges []any
	for _, s := range subnets {
		ranges = append(ranges, []any{map[string]any{"subnet": s}})
	}
	conf := map[string]any{
		"cniVersion": "1.1.0", "name": name, "type": plugin, "bridge": bridge, "isGateway": true,
		"dataDir": t.TempDir(),
		"ipam":    map[string]any{"type": "host-local", "ranges": ranges, "dataDir": t.TempDir()},
	}
	for k, v := range extra {
		conf[k] = v
	}
	return &network{conf: conf}
}

func (n *network) bytes(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(n.conf)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// podIP returns the result's first address of the family.
func podIP(t testing.TB, res *current.Result, v6 bool) netip.Addr {
	t.Helper()
	for _, ipc := range res.IPs {
		a, _ := netip.AddrFromSlice(ipc.Address.IP)
		a = a.Unmap()
		if a.Is6() == v6 {
			return a
		}
	}
	t.Fatalf("result has no v6=%v address: %v", v6, res.IPs)
	return netip.Addr{}
}

// sandboxIf returns the pod interface of the result.
func sandboxIf(res *current.Result) *current.Interface {
	for _, i := range res.Interfaces {
		if i.Sandbox != "" {
			return i
		}
	}
	return nil
}

func execCommand(name string, args ...string) ([]byte, error) {
	return exec.Command(name, args...).CombinedOutput()
}

func mustParse(s string) netip.Addr { return netip.MustParseAddr(s) }
