//go:build testbed

package e2e

import "strings"

func cut(s, sep string) (string, string, bool) { return strings.Cut(s, sep) }
