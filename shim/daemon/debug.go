package daemon

import (
	"encoding/json"
	"net/http"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/ruleagent"
)

// attachmentsHandler serves the agent's last outcomes as JSON.
func attachmentsHandler(outcomes func() []ruleagent.Outcome) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		doc := contract.DebugAttachments{Version: contract.DebugAttachmentsVersion, Attachments: []contract.DebugAttachment{}}
		for _, o := range outcomes() {
			doc.Attachments = append(doc.Attachments, contract.DebugAttachment{Pod: o.Pod.String(), Interface: o.IfName,
				Network: o.Network.String(), NetworkQoS: o.Selected, NetworkPolicies: o.Policies,
				MultiNetworkPolicies: o.MultiPolicies, ClusterNetworkPolicies: o.ClusterPolicies,
				NotEnforced: errString(o.PolicyIgnored), QoSIgnored: errString(o.Ignored), Error: errString(o.Err),
				NetworkStatusMissing: o.Unnamed && !o.NotMultus})
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(doc)
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
