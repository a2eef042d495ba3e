package netconf

import (
	"bufio"
	"bytes"
	"strings"
)

// WarningPrefix starts a line a netclass plugin writes to stderr about
// something it did other than the configuration says, though the ADD
// succeeded (the default queue missing from the kernel: tbf alone shapes).
// A runtime that reads the plugins' stderr tells users from it: netclass-dra
// turns each such line into a Warning Event on the pod.
const WarningPrefix = "netclass warning: "

// Warnings returns the messages of the warning lines in a plugin's stderr,
// without the prefix, in order.
func Warnings(stderr []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(stderr))
	for sc.Scan() {
		if msg, ok := strings.CutPrefix(sc.Text(), WarningPrefix); ok && msg != "" {
			out = append(out, msg)
		}
	}
	return out
}
