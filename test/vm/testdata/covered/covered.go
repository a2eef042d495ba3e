// Package covered is a package whose coverage profile the runner's tests bring back from the
// guest.
package covered

// Called is run by the package's test.
func Called() int { return 1 }

// NotCalled is not.
func NotCalled() int { return 2 }
