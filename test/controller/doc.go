// Package controller holds the tests of netclass-controller against the real API server of
// the test bed (build tag testbed; `make testbed-up` first): the controller runs in-process
// as its own service account with the RBAC of conf/deploy, so the tests also prove that
// RBAC sufficient.
package controller
