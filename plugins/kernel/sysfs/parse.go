package sysfs

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// maxCount bounds sriov_numvfs/sriov_totalvfs (the PCI SR-IOV capability's
// TotalVFs is 16 bits).
const maxCount = 65535

// ParsePCIAddress checks a PCI address in sysfs form (domain:bus:device.function,
// hexadecimal, e.g. 0000:03:00.2) and returns it in lower case.
func ParsePCIAddress(s string) (string, error) {
	domain, rest, ok1 := strings.Cut(s, ":")
	bus, rest, ok2 := strings.Cut(rest, ":")
	dev, fn, ok3 := strings.Cut(rest, ".")
	switch {
	case !ok1 || !ok2 || !ok3,
		len(domain) < 4 || len(domain) > 8 || !isHex(domain),
		len(bus) != 2 || !isHex(bus),
		len(dev) != 2 || !isHex(dev) || dev[0] > '1',
		len(fn) != 1 || fn[0] < '0' || fn[0] > '7':
		return "", fmt.Errorf("%q is not a PCI address (like 0000:03:00.2)", s)
	}
	return strings.ToLower(s), nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// ParseCount parses a sysfs count (sriov_numvfs, sriov_totalvfs): a decimal
// between 0 and 65535, surrounded by optional white space.
func ParseCount(b []byte) (int, error) {
	s := strings.TrimSpace(string(b))
	if s == "" || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("%q is not a count", s)
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > maxCount {
		return 0, fmt.Errorf("%q is not a count between 0 and %d", s, maxCount)
	}
	return n, nil
}

// ParseVirtfn returns N for a "virtfnN" entry name.
func ParseVirtfn(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "virtfn")
	if !ok || digits == "" || len(digits) > 5 || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	n := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, n <= maxCount
}

func virtfn(i int) string { return "virtfn" + strconv.Itoa(i) }

func readCount(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := ParseCount(b)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}
