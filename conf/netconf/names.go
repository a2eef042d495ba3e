package netconf

import (
	"bytes"
	"net"
	"strings"
	"unicode"

	"github.com/netclass-dev/netclass/conf/field"
)

// maxIfNameLen is IFNAMSIZ minus the terminating NUL.
const maxIfNameLen = 15

// ValidateIfName checks a Linux interface name the way the kernel's
// dev_valid_name and the CNI library's ValidateInterfaceName do, and also
// refuses what either lets through but tools, logs and the kernel's own name
// templates mishandle: NUL, '%' (a dev_alloc_name directive), non-printable
// and non-ASCII characters. Every path that takes a name (CNI_IFNAME, plugin
// options, a claim's AttachmentConfig) uses it, so a bad name fails early.
func ValidateIfName(p field.Path, name string) error {
	switch {
	case name == "":
		return field.Invalid(p, "is required")
	case len(name) > maxIfNameLen:
		return field.Invalid(p, "%q is longer than %d characters", name, maxIfNameLen)
	case name == "." || name == "..":
		return field.Invalid(p, "%q is not a valid interface name", name)
	case strings.IndexFunc(name, unicode.IsSpace) >= 0 || strings.ContainsAny(name, "/:"):
		return field.Invalid(p, "%q must not contain '/', ':' or whitespace", name)
	case strings.IndexFunc(name, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsPrint(r) || r == '%' }) >= 0:
		return field.Invalid(p, "%q must hold printable ASCII characters only, and no '%%'", name)
	}
	return nil
}

// ValidateMAC checks a MAC address the same way on every path (a plugin's
// mac option, runtimeConfig.mac, args.cni.mac, CNI_ARGS MAC=, a claim's
// AttachmentConfig): a 6-byte, unicast, non-zero Ethernet address.
func ValidateMAC(p field.Path, s string) error {
	_, err := ParseMAC(p, s)
	return err
}

// ParseMAC parses a MAC address that ValidateMAC accepts.
func ParseMAC(p field.Path, s string) (net.HardwareAddr, error) {
	hw, err := net.ParseMAC(s)
	switch {
	case err != nil:
		return nil, field.Invalid(p, "not a MAC address: %q", s)
	case len(hw) != 6:
		return nil, field.Invalid(p, "must be a 6-byte Ethernet MAC address, got %q", s)
	case hw[0]&1 == 1:
		return nil, field.Invalid(p, "must be a unicast MAC address, got %q", s)
	case bytes.Equal(hw, make(net.HardwareAddr, 6)):
		return nil, field.Invalid(p, "must not be the all-zero MAC address")
	}
	return hw, nil
}

// validateMTU accepts 0 (default) or a value between the IPv4 minimum and the
// largest MTU Linux links take.
func validateMTU(p field.Path, mtu int) error {
	if mtu != 0 && (mtu < 68 || mtu > 65535) {
		return field.Invalid(p, "must be between 68 and 65535, got %d", mtu)
	}
	return nil
}
