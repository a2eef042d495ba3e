// Package memlimit sets the Go runtime's memory limit (GOMEMLIMIT) from the
// memory limit of the container netclass-dra runs in, so that the garbage
// collector works harder as the daemon nears it instead of the kernel
// killing it: netclass-dra runs as root on every node and holds what its
// tenants' objects compile to (bounded: shim/netpolicy's limits), and an
// OOM kill would stop attaching and securing every pod of the node.
package memlimit

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Fraction is the share of the container's limit given to the Go heap;
// the rest is for stacks, the runtime and what is not Go's (cgo, page cache
// charged to the container).
const Fraction = 0.9

// Apply sets the runtime's limit from the container's, unless GOMEMLIMIT is
// set (the runtime then already follows it) or there is no limit. It
// returns the limit set (0: none).
func Apply() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	// where a container reads its memory limit: cgroup v2, then v1
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if limit, ok := Parse(string(b)); ok {
			debug.SetMemoryLimit(limit)
			return limit
		}
		return 0
	}
	return 0
}

// Parse turns a cgroup's memory limit into the runtime's: Fraction of it;
// "max", an unreadable value or v1's "no limit" (a page-rounded
// MaxInt64) give none.
func Parse(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0, false
	}
	return int64(float64(n) * Fraction), true
}
