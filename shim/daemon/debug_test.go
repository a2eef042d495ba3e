package daemon

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/netclass-dev/netclass/api/contract"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/ruleagent"
)

// /debug/attachments shows what applies to each attachment, versioned.
func TestAttachmentsHandler(t *testing.T) {
	outs := []ruleagent.Outcome{{Pod: types.NamespacedName{Namespace: "t1", Name: "web"}, IfName: "net1",
		Network: attachment.NetworkRef{Kind: "PodNetwork", Name: "blue"}, Selected: []string{"gold"},
		Policies: []string{"deny", "web"}, MultiPolicies: []string{"m"}, PolicyIgnored: errors.New("NetworkPolicy t1/web egress[0]: x")}}
	rec := httptest.NewRecorder()
	attachmentsHandler(func() []ruleagent.Outcome { return outs }).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/attachments", nil))
	var doc contract.DebugAttachments
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if doc.Version != contract.DebugAttachmentsVersion || len(doc.Attachments) != 1 {
		t.Fatalf("document %+v", doc)
	}
	a := doc.Attachments[0]
	if a.Pod != "t1/web" || a.Interface != "net1" || !slices.Equal(a.NetworkPolicies, []string{"deny", "web"}) ||
		!slices.Equal(a.MultiNetworkPolicies, []string{"m"}) ||
		!slices.Equal(a.NetworkQoS, []string{"gold"}) || a.NotEnforced == "" || a.Error != "" || a.Network == "" {
		t.Errorf("attachment %+v", a)
	}
}

// An attachment whose network-status does not name its NAD is listed as
// missing it, unless its pod asks Multus for nothing on it.
func TestAttachmentsHandlerNetworkStatusMissing(t *testing.T) {
	outs := []ruleagent.Outcome{
		{Pod: types.NamespacedName{Namespace: "t1", Name: "a"}, IfName: "net1", Unnamed: true},
		{Pod: types.NamespacedName{Namespace: "t1", Name: "b"}, IfName: "net1", Unnamed: true, NotMultus: true},
		{Pod: types.NamespacedName{Namespace: "t1", Name: "c"}, IfName: "net1"},
	}
	rec := httptest.NewRecorder()
	attachmentsHandler(func() []ruleagent.Outcome { return outs }).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/attachments", nil))
	var doc contract.DebugAttachments
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	var missing []string
	for _, a := range doc.Attachments {
		if a.NetworkStatusMissing {
			missing = append(missing, a.Pod)
		}
	}
	if !slices.Equal(missing, []string{"t1/a"}) {
		t.Errorf("networkStatusMissing on %v, want t1/a only", missing)
	}
}
