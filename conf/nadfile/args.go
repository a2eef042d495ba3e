package nadfile

import (
	"encoding/json"
	"strings"

	"github.com/netclass-dev/netclass/conf/field"
)

// ArgsKey is the key of netclass-nad's block in the "args" of every plugin
// it runs (CNI's convention: args carries what a caller passes, and a
// plugin ignores what it does not understand). The listed plugins keep
// their configuration, args included, in the records of their attachments,
// so the block says which NAD an attachment was made through. netclass-nad
// alone writes it: it replaces whatever block of that key its caller
// passed (Multus puts a pod's cni-args under args.cni only).
const ArgsKey = "netclass.dev"

// Args is netclass-nad's block in the listed plugins' args.
type Args struct {
	// NAD is the NetworkAttachmentDefinition ("<namespace>/<name>") whose
	// config netclass-nad ran, as that config's "nad" says (netclass-controller
	// writes it in every NAD it generates).
	NAD string `json:"nad,omitempty"`
}

// ParseNAD reads a NAD's "<namespace>/<name>"; p names the field in errors.
func ParseNAD(p field.Path, s string) error {
	ns, name, ok := strings.Cut(s, "/")
	var errs field.Errors
	if !ok || !isLabel(ns) {
		errs.Add(p, "%q is not <namespace>/<name> of a NetworkAttachmentDefinition", s)
	} else if !isSubdomain(name) {
		errs.Add(p, "name %q is not a DNS-1123 subdomain", name)
	}
	return errs.Err()
}

// NADOf is the NAD a plugin's configuration (as its record keeps it) says
// its attachment was made through: args' netclass-nad block, "" when there
// is none or the configuration does not parse.
func NADOf(config []byte) string {
	var c struct {
		Args map[string]json.RawMessage `json:"args"`
	}
	if json.Unmarshal(config, &c) != nil {
		return ""
	}
	var a Args
	if raw, ok := c.Args[ArgsKey]; !ok || json.Unmarshal(raw, &a) != nil {
		return ""
	}
	return a.NAD
}
