// Package nadfile is the node-local file through which a NetworkAttachmentDefinition
// that netclass-controller generates reaches what netclass-dra rendered for
// its node: netclass-dra writes, for every network it offers on the node, the
// CNI configuration list a claim attachment of that network would get (less
// the attachment's own parts), and the delegating plugin netclass-nad reads
// it and runs the listed plugins. It is pure: names, encoding and parsing.
package nadfile

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/netclass-dev/netclass/conf/field"
	"github.com/netclass-dev/netclass/conf/netconf"
)

// Type is the delegating plugin (netclass-nad) a generated NAD's config
// names, with the network as "network".
const Type = "netclass-nad"

// Version is the format of the file; a reader refuses any other, so a
// node's plugin and daemon of different releases fail loudly, never
// silently misread each other.
const Version = "netclass.dev/nad/v1"

// Where the files and the attachments made through them live on a node.
const (
	// DefaultStateDir is netclass-dra's default --state-dir; the files are
	// in its Subdir.
	DefaultStateDir = "/var/lib/netclass"
	// Subdir is the directory under the state directory holding the files.
	Subdir = "nad"
	// DataDir is where the plugins keep the records of attachments made
	// through a generated NAD: their default (netconf.DefaultDataDir), where
	// the attachments Multus makes through hand-written NADs are too, apart
	// from netclass-dra's own (render.StateDir), so that the CNI GC
	// netclass-dra runs with its claims' attachments never removes them.
	// host-local's reservations stay shared with the claims'
	// (render.IPAMStateDir): both draw from the same node block.
	DataDir = netconf.DefaultDataDir
)

// CacheDir is where netclass-nad keeps libcni's result cache under the
// state directory: the configuration each attachment was added with, which
// its DEL and CHECK use even after the network stopped being offered.
func CacheDir(stateDir string) string { return filepath.Join(stateDir, "nad-cache") }

// File is one network's rendered configuration on the node.
type File struct {
	Version string `json:"version"`
	// Network is the network: "<namespace>/<name>" for a Network,
	// "<name>" for a PodNetwork.
	Network string `json:"network"`
	// ConfList is the CNI configuration list.
	ConfList json.RawMessage `json:"confList"`
}

// Ref is a network as a NAD's config names it.
type Ref struct {
	Namespace string // "" for a PodNetwork
	Name      string
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "/" + r.Name
}

// FileName is the file's name in the directory: "<namespace>_<name>.json",
// or "<name>.json" for a PodNetwork ('_' is in no Kubernetes name, so names
// never collide).
func (r Ref) FileName() string { return r.CNIName() + ".json" }

// CNIName is the CNI network name the network's list runs under, as the
// records of its attachments name it: "<namespace>_<name>", or "<name>"
// for a PodNetwork (what shim/attachment.NetworkRef.CNIName gives).
func (r Ref) CNIName() string {
	if r.Namespace == "" {
		return r.Name
	}
	return r.Namespace + "_" + r.Name
}

// Path is the file of r under stateDir.
func Path(stateDir string, r Ref) string {
	return filepath.Join(stateDir, Subdir, r.FileName())
}

// ParseRef reads "<namespace>/<name>" (a Network) or "<name>" (a
// PodNetwork); p names the field in errors.
func ParseRef(p field.Path, s string) (Ref, error) {
	ns, name, namespaced := strings.Cut(s, "/")
	if !namespaced {
		ns, name = "", s
	}
	var errs field.Errors
	if namespaced && !isLabel(ns) {
		errs.Add(p, "namespace %q is not a DNS-1123 label", ns)
	}
	if !isSubdomain(name) {
		errs.Add(p, "name %q is not a DNS-1123 subdomain (want <namespace>/<name> for a Network, <name> for a PodNetwork)", name)
	}
	return Ref{Namespace: ns, Name: name}, errs.Err()
}

// Encode renders the file of r.
func Encode(r Ref, confList []byte) ([]byte, error) {
	if !json.Valid(confList) {
		return nil, fmt.Errorf("nad file of %s: configuration list is not JSON", r)
	}
	return json.Marshal(File{Version: Version, Network: r.String(), ConfList: confList})
}

// Parse reads a file and checks it is of this version, for want, and holds
// a configuration list object.
func Parse(b []byte, want Ref) (*File, error) {
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("nad file of %s: %w", want, err)
	}
	var errs field.Errors
	if f.Version != Version {
		errs.Add("version", "is %q, this plugin reads %q", f.Version, Version)
	}
	if f.Network != want.String() {
		errs.Add("network", "is %q, want %q", f.Network, want)
	}
	var list map[string]any
	if err := json.Unmarshal(f.ConfList, &list); err != nil || list == nil {
		errs.Add("confList", "is not a configuration list object")
	}
	if err := errs.Err(); err != nil {
		return nil, fmt.Errorf("nad file of %s: %w", want, err)
	}
	return &f, nil
}

func isLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && (c != '-' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

func isSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !isLabel(l) {
			return false
		}
	}
	return true
}
