package nadfiles

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/netclass-dev/netclass/conf/nadfile"
	"github.com/netclass-dev/netclass/shim/attachment"
	"github.com/netclass-dev/netclass/shim/network"
)

func net(ns, name, typ string) network.Network {
	return network.Network{
		Ref:  attachment.NetworkRef{Kind: "Network", Namespace: ns, Name: name},
		Type: typ,
		Config: json.RawMessage(`{"cniVersion":"1.1.0","name":"x","type":"netclass-bridge","bridge":"b0",` +
			`"ipam":{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24"}]]}}`),
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, nadfile.Subdir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// readList reads the network's file from the state directory: the list it
// holds, once the file parses.
func readList(t *testing.T, state string, ref nadfile.Ref) []byte {
	t.Helper()
	b, err := os.ReadFile(nadfile.Path(state, ref))
	if err != nil {
		t.Fatal(err)
	}
	f, err := nadfile.Parse(b, ref)
	if err != nil {
		t.Fatalf("the written file of %s does not parse: %v", ref, err)
	}
	return f.ConfList
}

func TestSync(t *testing.T) {
	state := t.TempDir()
	d := Dir{Path: filepath.Join(state, nadfile.Subdir)}
	blue, storage := net("blue", "vx", "netclass-bridge"), net("", "storage", "netclass-bridge")
	sriov := net("blue", "vf", "netclass-sriov")
	if err := d.Sync([]network.Network{blue, storage, sriov}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, state); !slices.Equal(got, []string{"blue_vx.json", "storage.json"}) {
		t.Fatalf("files %v", got)
	}
	var list struct{ Name string }
	if json.Unmarshal(readList(t, state, nadfile.Ref{Namespace: "blue", Name: "vx"}), &list); list.Name != "blue_vx" {
		t.Errorf("list name %q, want the claims' blue_vx (shared host-local reservations)", list.Name)
	}
	info, _ := os.Stat(nadfile.Path(state, nadfile.Ref{Name: "storage"}))
	os.WriteFile(filepath.Join(state, nadfile.Subdir, "keep.txt"), nil, 0o644)
	os.WriteFile(filepath.Join(state, nadfile.Subdir, ".tmp-123"), nil, 0o600) // a write cut short
	if err := d.Sync([]network.Network{storage}); err != nil {
		t.Fatal(err)
	}
	if got := names(t, state); !slices.Equal(got, []string{"keep.txt", "storage.json"}) {
		t.Errorf("after blue/vx stopped being offered: files %v", got)
	}
	if again, _ := os.Stat(nadfile.Path(state, nadfile.Ref{Name: "storage"})); !os.SameFile(info, again) {
		t.Error("an unchanged file was rewritten")
	}
	bad := net("blue", "bad", "netclass-bridge")
	bad.Config = json.RawMessage(`{`)
	if err := d.Sync([]network.Network{storage, bad}); err == nil {
		t.Error("a network that does not render: no error")
	}
	if got := names(t, state); !slices.Equal(got, []string{"keep.txt", "storage.json"}) {
		t.Errorf("with a network that does not render: files %v", got)
	}
}

// A list whose records the agent reads starts its ports closed (the agent
// opens them once their policy is in place); one keeping its records
// elsewhere, or with no agent reading any, starts them open. A NAD's
// records are in the default store also when the network's config names
// a dataDir (its claims'), so the agent reading the default store covers
// them.
func TestSyncStartsClosedWhereTheAgentReads(t *testing.T) {
	own := net("blue", "own", "netclass-bridge")
	own.Config = json.RawMessage(`{"cniVersion":"1.1.0","name":"x","type":"netclass-bridge","bridge":"b0","dataDir":"/srv/records"}`)
	for _, c := range []struct {
		name     string
		agentDir string
		net      network.Network
		closed   bool
	}{
		{"the agent reads the default store", "/var/lib/cni/netclass", net("blue", "vx", "netclass-bridge"), true},
		{"no agent", "", net("blue", "vx", "netclass-bridge"), false},
		{"the network keeps its claims' records elsewhere", "/var/lib/cni/netclass", own, true},
		{"the agent reads another store", "/srv/records/", own, false},
	} {
		state := t.TempDir()
		d := Dir{Path: filepath.Join(state, nadfile.Subdir), AgentDir: c.agentDir}
		if err := d.Sync([]network.Network{c.net}); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		conf := readList(t, state, nadfile.Ref{Namespace: c.net.Ref.Namespace, Name: c.net.Ref.Name})
		var list struct {
			Plugins []struct {
				PortSecurity struct{ SpoofCheck, StartClosed bool } `json:"portSecurity"`
			}
		}
		if err := json.Unmarshal(conf, &list); err != nil || len(list.Plugins) == 0 {
			t.Fatalf("%s: %s: %v", c.name, conf, err)
		}
		if ps := list.Plugins[0].PortSecurity; ps.StartClosed != c.closed || !ps.SpoofCheck {
			t.Errorf("%s: portSecurity %+v, want startClosed %v and spoofCheck", c.name, ps, c.closed)
		}
	}
}
