# API types: generated deepcopy and CRD manifests (scripts/api/generate.sh), and the tests of
# the CRD schemas against a real API server (the test bed of scripts/testbed).
.PHONY: generate verify-generated test-api-testbed

generate:
	scripts/api/generate.sh
	cp conf/crd/*.yaml conf/helm/netclass/crds/ # the chart ships the same CRDs (conf/helm/chart_test.go)

verify-generated:
	scripts/api/generate.sh --verify

# Needs a running test bed (make testbed-up); the tests fail, never skip, when there is none.
test-api-testbed:
	$(GO) test -tags testbed -count=1 ./api/...
