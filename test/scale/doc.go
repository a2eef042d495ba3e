// Package scale holds the long scenarios of `make test-scale` (build tag
// scale; they run on the test bed like the testbed-tagged tests): a churn of a thousand pods with claims over three
// nodes, checked for anything left behind. They need the test bed with
// three nodes and take more than ten minutes, so `make test` does not run
// them.
package scale
