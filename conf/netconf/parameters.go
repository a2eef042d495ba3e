package netconf

import (
	"encoding/json"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"
)

// MainTypes returns the plugin types a network object may name.
func MainTypes() []string { return []string{TypeBridge, TypeVLAN, TypeVXLAN, TypeSRIOV} }

// Parse decodes and validates the configuration of any netclass plugin,
// dispatching on its "type".
func Parse(data []byte) (any, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, decodeError(err)
	}
	switch head.Type {
	case TypeBridge:
		return ParseBridge(data)
	case TypeVLAN:
		return ParseVLAN(data)
	case TypeVXLAN:
		return ParseVXLAN(data)
	case TypeSRIOV:
		return ParseSRIOV(data)
	case TypeQoS:
		return ParseQoSChain(data)
	case "":
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "type: is required", "")
	}
	return nil, types.NewError(types.ErrInvalidNetworkConfig,
		fmt.Sprintf("type: %q is not a netclass plugin (want one of %v)", head.Type, append(MainTypes(), TypeQoS)), "")
}

// RenderParameters turns a network object's parameters (one netclass plugin
// configuration without cniVersion and name) into a complete plugin
// configuration for the network called name, and validates it. Only main
// plugin types are accepted: netclass-qos is added by netclass itself.
func RenderParameters(name, cniVersion string, params []byte) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(params, &obj); err != nil {
		return nil, decodeError(err)
	}
	if obj == nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "parameters: must be a JSON object naming a netclass plugin type", "")
	}
	t, _ := obj["type"].(string)
	if !isMainType(t) {
		return nil, types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("type: must be one of %v, got %q", MainTypes(), t), "")
	}
	obj["cniVersion"] = cniVersion
	obj["name"] = name
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("render parameters of %q: %w", name, err)
	}
	if _, err := Parse(out); err != nil {
		return nil, err
	}
	return out, nil
}

func isMainType(t string) bool {
	for _, m := range MainTypes() {
		if t == m {
			return true
		}
	}
	return false
}
