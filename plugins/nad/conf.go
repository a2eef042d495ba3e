// Package nad is netclass-nad, the delegating CNI plugin of the
// NetworkAttachmentDefinitions netclass-controller generates: its config
// names a netclass network, and it runs, through libcni as a runtime would,
// the configuration list netclass-dra rendered for that network on this
// node (conf/nadfile), with the caller's attachment (container, netns,
// interface, CNI_ARGS, runtimeConfig, args) passed through.
package nad

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/nadfile"
)

// Type is the plugin's type (binary name).
const Type = nadfile.Type

// Conf is netclass-nad's configuration:
// {"type":"netclass-nad","network":"<namespace>/<name>"} for a Network,
// "network":"<name>" for a PodNetwork; netclass-controller adds the NAD it
// writes the config in as "nad".
type Conf struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	// Network names the netclass network.
	Network string `json:"network"`
	// NAD is the NetworkAttachmentDefinition holding this config
	// ("<namespace>/<name>"), passed on to the listed plugins in their args
	// (nadfile.Args), so their records say which NAD the attachment was made
	// through. Optional: a config without it passes no NAD on.
	NAD string `json:"nad,omitempty"`
	// StateDir is netclass-dra's --state-dir (default
	// nadfile.DefaultStateDir): the rendered files are in its "nad" directory.
	StateDir string `json:"stateDir,omitempty"`
	// RuntimeConfig is passed on as the capability arguments: libcni gives
	// each listed plugin the ones it declares.
	RuntimeConfig map[string]any `json:"runtimeConfig,omitempty"`
	// Args (args.cni.*: Multus's cni-args) is passed on to every listed plugin.
	Args       json.RawMessage `json:"args,omitempty"`
	PrevResult json.RawMessage `json:"prevResult,omitempty"`
	// ValidAttachments is set on GC.
	ValidAttachments []types.GCAttachment `json:"cni.dev/valid-attachments,omitempty"`

	// Ref is Network parsed.
	Ref nadfile.Ref `json:"-"`
}

// Parse reads and validates the configuration; every problem is a CNI
// error 7 (invalid network config) naming its field.
func Parse(b []byte) (*Conf, error) {
	var c Conf
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "netclass-nad: decode configuration", err.Error())
	}
	var errs field.Errors
	if c.Type != Type {
		errs.Add("type", "is %q, want %q", c.Type, Type)
	}
	if c.Name == "" {
		errs.Add("name", "is required")
	}
	ref, err := nadfile.ParseRef("network", c.Network)
	errs.Append(err)
	c.Ref = ref
	if c.NAD != "" {
		errs.Append(nadfile.ParseNAD("nad", c.NAD))
	}
	if c.StateDir == "" {
		c.StateDir = nadfile.DefaultStateDir
	}
	if !filepath.IsAbs(c.StateDir) {
		errs.Add("stateDir", "%q is not an absolute path", c.StateDir)
	}
	if len(c.Args) > 0 && string(c.Args) != "null" {
		var obj map[string]any
		if err := json.Unmarshal(c.Args, &obj); err != nil {
			errs.Add("args", "is not an object")
		}
	}
	if err := errs.Err(); err != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("netclass-nad: %v", err), "")
	}
	return &c, nil
}

// withArgs returns the list with args set on every plugin: the caller's,
// with netclass-nad's own block (nadfile.ArgsKey) naming nad, or removed
// when nad is "" (a caller never sets it).
func withArgs(list []byte, args json.RawMessage, nad string) ([]byte, error) {
	a := map[string]any{}
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &a); err != nil {
			return nil, err
		}
	}
	_, forged := a[nadfile.ArgsKey]
	delete(a, nadfile.ArgsKey)
	if nad != "" {
		a[nadfile.ArgsKey] = nadfile.Args{NAD: nad}
	}
	if len(a) == 0 && !forged {
		return list, nil
	}
	var l map[string]any
	if err := json.Unmarshal(list, &l); err != nil {
		return nil, err
	}
	plugins, _ := l["plugins"].([]any)
	for _, p := range plugins {
		if obj, ok := p.(map[string]any); ok {
			obj["args"] = a
		}
	}
	return json.Marshal(l)
}
