package harness

import (
	"context"
	"fmt"
	"strings"

	"github.com/netclass-dev/netclass/test/testbed/bed"
)

// FloodEntries are the remote VTEPs of a VXLAN device's all-zeros FDB entries on a node
// (nil when the device does not exist there).
func FloodEntries(ctx context.Context, n bed.Node, dev string) ([]string, error) {
	if _, err := n.Output(ctx, "ip", "link", "show", "dev", dev); err != nil {
		return nil, nil
	}
	out, err := n.Output(ctx, "bridge", "fdb", "show", "dev", dev)
	if err != nil {
		return nil, err
	}
	return parseFlood(out), nil
}

// parseFlood reads `bridge fdb show` lines "00:00:00:00:00:00 dst ADDR self permanent".
func parseFlood(out string) []string {
	var remotes []string
	for _, line := range splitLines(out) {
		var mac, dst, addr string
		if n, _ := fmt.Sscan(line, &mac, &dst, &addr); n == 3 && mac == "00:00:00:00:00:00" && dst == "dst" {
			remotes = append(remotes, addr)
		}
	}
	return remotes
}

func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
