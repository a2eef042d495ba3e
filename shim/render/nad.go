package render

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/netclass-dev/netclass/conf/nadfile"
	"github.com/netclass-dev/netclass/shim/network"
)

// NADConfList renders what an attachment made through a NetworkAttachmentDefinition
// netclass-controller generated for n gets on this node (conf/nadfile): the
// list a claim attachment without opaque configuration or NetworkQoS rules
// gets (ConfList), except that
//   - its attachment records live under nadfile.DataDir, apart from the
//     claims', so netclass-dra's CNI GC (which knows only its claims) never
//     removes them — also for a network whose config names a dataDir of
//     its own, which is its claims' (a network that names nadfile.DataDir
//     gets no list: the two would share it); host-local's reservations stay
//     shared with the claims' (the same node block, no address handed out
//     twice);
//   - its port passes nothing until netclass-dra's agent has put its
//     policy in place and opened it, as a claim's (startClosed), when the
//     agent covers the attachment: agentDir, the plugins' record store the
//     agent reads ("": none), is where the list keeps its records. Otherwise
//     nothing would open it, and it is open from the start (spoof checks
//     stay);
//   - it declares the capabilities a runtime such as Multus fills in: qos and
//     bandwidth always, mac and ips when the network allows static addresses.
func NADConfList(n network.Network, agentDir string) ([]byte, error) {
	b, err := ConfList(Input{Network: n})
	if err != nil {
		return nil, err
	}
	var list map[string]any
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("render %s for its NAD: %w", n.Ref, err)
	}
	plugins, _ := list["plugins"].([]any)
	main, ok := plugins[0].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("render %s for its NAD: no main plugin", n.Ref)
	}
	if dir, _ := main["dataDir"].(string); filepath.Clean(dir) == nadfile.DataDir {
		return nil, fmt.Errorf("render %s for its NAD: its config's dataDir %s is where the attachments of generated NADs keep their records: its claims' would share it, and netclass-dra's CNI GC would remove the NADs'; name another", n.Ref, dir)
	}
	main["dataDir"] = nadfile.DataDir
	main["portSecurity"] = map[string]any{"spoofCheck": true}
	if dir, _ := main["dataDir"].(string); agentDir != "" && filepath.Clean(dir) == filepath.Clean(agentDir) {
		setPortSecurity(main)
	}
	caps, _ := main["capabilities"].(map[string]any)
	if caps == nil {
		caps = map[string]any{}
	}
	caps["qos"], caps["bandwidth"] = true, true
	if n.AllowStaticAddresses {
		caps["mac"], caps["ips"] = true, true
	}
	main["capabilities"] = caps
	out, err := json.Marshal(list)
	if err != nil {
		return nil, fmt.Errorf("render %s for its NAD: %w", n.Ref, err)
	}
	if err := Validate(out); err != nil {
		return nil, fmt.Errorf("render %s for its NAD: %w", n.Ref, err)
	}
	return out, nil
}
