package netconf

import (
	"strings"

	"github.com/netclass-dev/netclass/conf/field"
)

// maxIfNameLen is IFNAMSIZ minus the terminating NUL.
const maxIfNameLen = 15

// ValidateIfName checks a Linux interface name the way the kernel's
// dev_valid_name does.
func ValidateIfName(p field.Path, name string) error {
	switch {
	case name == "":
		return field.Invalid(p, "is required")
	case len(name) > maxIfNameLen:
		return field.Invalid(p, "%q is longer than %d characters", name, maxIfNameLen)
	case name == "." || name == "..":
		return field.Invalid(p, "%q is not a valid interface name", name)
	case strings.ContainsAny(name, "/: \t\n\r\f\v"):
		return field.Invalid(p, "%q must not contain '/', ':' or whitespace", name)
	}
	return nil
}

// validateMTU accepts 0 (default) or a value between the IPv4 minimum and the
// largest MTU Linux links take.
func validateMTU(p field.Path, mtu int) error {
	if mtu != 0 && (mtu < 68 || mtu > 65535) {
		return field.Invalid(p, "must be between 68 and 65535, got %d", mtu)
	}
	return nil
}
