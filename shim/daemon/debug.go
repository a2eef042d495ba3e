package daemon

import (
	"encoding/json"
	"net/http"

	"github.com/netclass-dev/netclass/shim/qosagent"
)

// AttachmentsVersion versions /debug/attachments' document.
const AttachmentsVersion = "netclass.dev/debug-attachments/v1"

// attachmentsDoc is /debug/attachments: what applies to each running
// attachment of the node as of the agent's last sync.
type attachmentsDoc struct {
	Version     string           `json:"version"`
	Attachments []attachmentView `json:"attachments"`
}

type attachmentView struct {
	Pod             string   `json:"pod"`
	Interface       string   `json:"interface"`
	Network         string   `json:"network"`
	NetworkQoS      []string `json:"networkQoS,omitempty"`
	NetworkPolicies []string `json:"networkPolicies,omitempty"`
	// NotEnforced lists the policy rules left out; Error why the
	// attachment does not hold its rules.
	NotEnforced string `json:"notEnforced,omitempty"`
	QoSIgnored  string `json:"qosIgnored,omitempty"`
	Error       string `json:"error,omitempty"`
}

// attachmentsHandler serves the agent's last outcomes as JSON.
func attachmentsHandler(outcomes func() []qosagent.Outcome) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		doc := attachmentsDoc{Version: AttachmentsVersion, Attachments: []attachmentView{}}
		for _, o := range outcomes() {
			doc.Attachments = append(doc.Attachments, attachmentView{Pod: o.Pod.String(), Interface: o.IfName,
				Network: o.Network.String(), NetworkQoS: o.Selected, NetworkPolicies: o.Policies,
				NotEnforced: errString(o.PolicyIgnored), QoSIgnored: errString(o.Ignored), Error: errString(o.Err)})
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
