package render

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ncv1 "github.com/netclass-dev/netclass/api/netclass/v1alpha1"
)

func TestSelectsNAD(t *testing.T) {
	storage := &NAD{Namespace: "games", Name: "storage", Labels: map[string]string{"name": "ovn-storage"},
		NamespaceLabels: map[string]string{"team": "games"}}
	bad := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: metav1.LabelSelectorOpIn}}}
	byName := metav1.LabelSelector{MatchLabels: map[string]string{"name": "ovn-storage"}}
	for _, c := range []struct {
		name    string
		sel     *ncv1.NetworkAttachmentDefinitionSelector
		nad     *NAD
		want    bool
		wantErr bool
	}{
		{"empty selects all", &ncv1.NetworkAttachmentDefinitionSelector{}, storage, true, false},
		{"by NAD label", &ncv1.NetworkAttachmentDefinitionSelector{NetworkSelector: byName}, storage, true, false},
		{"other NAD label", &ncv1.NetworkAttachmentDefinitionSelector{NetworkSelector: metav1.LabelSelector{MatchLabels: map[string]string{"name": "x"}}}, storage, false, false},
		{"by namespace label", &ncv1.NetworkAttachmentDefinitionSelector{NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "games"}}, NetworkSelector: byName}, storage, true, false},
		{"other namespace label", &ncv1.NetworkAttachmentDefinitionSelector{NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "other"}}, NetworkSelector: byName}, storage, false, false},
		{"NAD label matched against the namespace", &ncv1.NetworkAttachmentDefinitionSelector{NamespaceSelector: byName}, storage, false, false},
		{"no NAD", &ncv1.NetworkAttachmentDefinitionSelector{}, nil, false, false},
		{"no selector", nil, storage, false, false},
		{"bad namespace selector", &ncv1.NetworkAttachmentDefinitionSelector{NamespaceSelector: bad}, storage, false, true},
		{"bad network selector", &ncv1.NetworkAttachmentDefinitionSelector{NetworkSelector: bad}, storage, false, true},
	} {
		got, err := SelectsNAD(c.sel, c.nad)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("%s: got %v, %v; want %v, error %v", c.name, got, err, c.want, c.wantErr)
		}
	}
}

// Seed 003's NAD example, read unchanged (apiVersion aside), selects the
// attachments made through a NAD labelled name=ovn-storage in any
// namespace, on a pod of its namespace, and nothing else: not the same
// network without a NAD, not another NAD, not the default network.
func TestSeedNADExample(t *testing.T) {
	objs := seedFile(t, "seed003-networkqos-nad.yaml")
	nad := &NAD{Namespace: "infra", Name: "storage", Labels: map[string]string{"name": "ovn-storage"}}
	other := &NAD{Namespace: "games", Name: "blue", Labels: map[string]string{"name": "blue"}}
	for _, c := range []struct {
		name   string
		target Target
		want   string
	}{
		{"through the NAD", Target{Namespace: "games", Network: bridgeNet(""), NAD: nad},
			`[{"priority":40,"dscp":11,"classifier":{"to":[{"ipBlock":{"cidr":"0.0.0.0/0"}}],"ports":[{"protocol":"TCP","port":80},{"protocol":"TCP","port":443}]}}]`},
		{"pod of another namespace", Target{Namespace: "other", Network: bridgeNet(""), NAD: nad}, "null"},
		{"no NAD", Target{Namespace: "games", Network: bridgeNet("")}, "null"},
		{"another NAD", Target{Namespace: "games", Network: bridgeNet(""), NAD: other}, "null"},
	} {
		rules, _, err := Rules(objs, c.target, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if b, _ := json.Marshal(rules); string(b) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, b, c.want)
		}
	}
}
