package attach

import (
	"fmt"
	"net"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/netconf"
)

// CNIArg returns the value of key in CNI_ARGS ("K1=V1;K2=V2"), or "".
func CNIArg(args, key string) string {
	for _, kv := range strings.Split(args, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == key {
			return v
		}
	}
	return ""
}

// ParseMAC parses a MAC a config or runtime asked for ("" is nil), from the
// field p, with the checks every path shares (netconf.ParseMAC): CNI error 7.
func ParseMAC(s string, p field.Path) (net.HardwareAddr, error) {
	if s == "" {
		return nil, nil
	}
	hw, err := netconf.ParseMAC(p, s)
	if err != nil {
		return nil, Invalid("%v", err)
	}
	return hw, nil
}

// PrevResult decodes the prevResult of a configuration as a current result.
// It is required: CHECK and chained ADDs cannot work without it.
func PrevResult(cniVersion string, raw map[string]any) (*current.Result, error) {
	if raw == nil {
		return nil, Invalid("prevResult: is required")
	}
	conf := &types.PluginConf{CNIVersion: cniVersion, RawPrevResult: raw}
	if err := version.ParsePrevResult(conf); err != nil {
		return nil, Invalid("prevResult: %v", err)
	}
	res, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return nil, Invalid("prevResult: %v", err)
	}
	return res, nil
}

// Valid returns the set of attachments a GC must keep.
func Valid(list []types.GCAttachment) map[types.GCAttachment]bool {
	m := make(map[types.GCAttachment]bool, len(list))
	for _, a := range list {
		m[a] = true
	}
	return m
}

// Print writes the result to stdout in the configuration's CNI version.
func Print(res *current.Result, cniVersion string) error {
	if err := types.PrintResult(res, cniVersion); err != nil {
		return fmt.Errorf("print result: %w", err)
	}
	return nil
}
