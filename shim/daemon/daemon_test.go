package daemon

import (
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

func TestConfigValidate(t *testing.T) {
	err := (&Config{}).validate()
	for _, want := range []string{"API server", "node name", "kubelet directory", "NRI socket", "state directory", "CNI bin directory"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("validation error %v does not mention %q", err, want)
		}
	}
	ok := Config{RestConfig: &rest.Config{}, NodeName: "n", KubeletDir: "/k", NRISocket: "/s", StateDir: "/st", CNIBinDirs: []string{"/b"}}
	if err := ok.validate(); err != nil {
		t.Fatal(err)
	}
}
