#!/usr/bin/env bash
# Generates the deepcopy code of api/... and the CRD manifests in conf/crd/ with a pinned
# controller-gen, and the typed clients of api/generated/ (clientset, listers, informers,
# applyconfigurations) with a pinned k8s.io/code-generator, or (--verify) checks that the
# committed files are what they generate.
#
#   scripts/api/generate.sh            regenerate in place
#   scripts/api/generate.sh --verify   regenerate into a temporary copy and fail if the
#                                      committed files differ (nothing in the tree changes)
#
# controller-gen is installed with `go install` (outside this module, so go.mod is not touched)
# into $NETCLASS_TOOLS_DIR (default: bin/tools, which is gitignored), one directory per version;
# so are code-generator's client-gen, lister-gen, informer-gen and applyconfiguration-gen.
set -euo pipefail

# sigs.k8s.io/controller-tools v0.23.0 is the newest release; it is built against
# k8s.io/* v0.37.0 and handles the v0.37.1 API types of go.mod.
CONTROLLER_GEN_VERSION=${CONTROLLER_GEN_VERSION:-v0.23.0}
# k8s.io/code-generator at the version of go.mod's k8s.io/* modules.
CODE_GENERATOR_VERSION=${CODE_GENERATOR_VERSION:-v0.37.1}
MODULE=github.com/netclass-dev/netclass
# The API packages clients are generated for (their types carry +genclient markers).
CLIENT_APIS=(api/multinetwork/v1 api/netclass/v1alpha1)
# The API type packages controller-gen reads (deepcopy, CRDs). Not ./api/...: api/contract
# and its tests import packages outside api/, which the scratch module does not copy.
API_PATHS='./api/multinetwork/...;./api/netclass/...'
# Kinds whose resource is not the generators' plural of the kind: the CRD names
# networkqoses (path=networkqoses), client-gen would say networkqoss.
PLURAL_EXCEPTIONS=Endpoints:Endpoints,NetworkQoS:NetworkQoSes

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tools_dir=${NETCLASS_TOOLS_DIR:-$root/bin/tools}
gen_dir="$tools_dir/controller-gen-$CONTROLLER_GEN_VERSION"
controller_gen="$gen_dir/controller-gen"
codegen_dir="$tools_dir/code-generator-$CODE_GENERATOR_VERSION"
codegen_bins=(client-gen lister-gen informer-gen applyconfiguration-gen)

die() { printf 'generate: %s\n' "$*" >&2; exit 1; }

install_controller_gen() {
	if [[ -x $controller_gen ]] && "$controller_gen" --version 2>/dev/null | grep -qF "$CONTROLLER_GEN_VERSION"; then
		return
	fi
	printf 'generate: installing controller-gen %s into %s\n' "$CONTROLLER_GEN_VERSION" "$gen_dir" >&2
	mkdir -p "$gen_dir"
	(cd "$gen_dir" && GOFLAGS=-buildvcs=false GOBIN="$gen_dir" go install "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION") ||
		die "cannot install controller-gen $CONTROLLER_GEN_VERSION"
}

install_code_generator() {
	local b missing=false
	for b in "${codegen_bins[@]}"; do
		[[ -x $codegen_dir/$b ]] || missing=true
	done
	$missing || return 0
	printf 'generate: installing k8s.io/code-generator %s into %s\n' "$CODE_GENERATOR_VERSION" "$codegen_dir" >&2
	mkdir -p "$codegen_dir"
	(cd "$codegen_dir" && GOFLAGS=-buildvcs=false GOBIN="$codegen_dir" go install \
		$(printf "k8s.io/code-generator/cmd/%s@$CODE_GENERATOR_VERSION " "${codegen_bins[@]}")) ||
		die "cannot install k8s.io/code-generator $CODE_GENERATOR_VERSION"
}

# run_client_generators MODULE_DIR: typed clientset, listers, informers and apply
# configurations under MODULE_DIR/api/generated, the layout kube_codegen.sh gen_client makes.
run_client_generators() {
	local mod=$1 out=api/generated pkg=$MODULE/api/generated
	local header=$root/scripts/api/boilerplate.go.txt
	local inputs=() api
	for api in "${CLIENT_APIS[@]}"; do
		inputs+=("$MODULE/$api")
	done
	(
		cd "$mod" || exit
		"$codegen_dir/applyconfiguration-gen" --go-header-file "$header" \
			--output-dir "$out/applyconfigurations" --output-pkg "$pkg/applyconfigurations" \
			"${inputs[@]}" || exit
		"$codegen_dir/client-gen" --go-header-file "$header" \
			--output-dir "$out/clientset" --output-pkg "$pkg/clientset" \
			--clientset-name versioned --plural-exceptions "$PLURAL_EXCEPTIONS" \
			--apply-configuration-package "$pkg/applyconfigurations" \
			--input-base "" $(printf -- "--input $MODULE/%s " "${CLIENT_APIS[@]}") || exit
		"$codegen_dir/lister-gen" --go-header-file "$header" \
			--output-dir "$out/listers" --output-pkg "$pkg/listers" \
			--plural-exceptions "$PLURAL_EXCEPTIONS" "${inputs[@]}" || exit
		"$codegen_dir/informer-gen" --go-header-file "$header" \
			--output-dir "$out/informers" --output-pkg "$pkg/informers" \
			--versioned-clientset-package "$pkg/clientset/versioned" \
			--listers-package "$pkg/listers" --plural-exceptions "$PLURAL_EXCEPTIONS" "${inputs[@]}" || exit
	)
}

# run_generators MODULE_DIR CRD_OUT_DIR: deepcopy in place under MODULE_DIR/api, CRDs into CRD_OUT_DIR.
# Every step's failure is returned explicitly: the caller's `|| die` turns set -e off in here.
run_generators() {
	local mod=$1 crd_out=$2
	(
		cd "$mod" || exit
		"$controller_gen" object paths="$API_PATHS" || exit
		"$controller_gen" crd:crdVersions=v1 paths="$API_PATHS" output:crd:dir="$crd_out" || exit
	) || return
	run_client_generators "$mod"
}

# the files generation owns, relative to the repository root
generated_files() {
	local top=$1
	(cd "$top" && find api -name zz_generated.deepcopy.go && find conf/crd -maxdepth 1 -name '*.yaml' &&
		find api/generated -name '*.go' ! -name '*_test.go' 2>/dev/null) | LC_ALL=C sort -u
}

install_controller_gen
install_code_generator

verify=false
case ${1:-} in
"") ;;
--verify) verify=true ;;
*) die "usage: $0 [--verify]" ;;
esac

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Generate into a scratch copy of the module's API packages: the tree is only touched once
# generation has succeeded, and --verify never touches it.
mkdir -p "$tmp/mod/conf/crd"
cp "$root/go.mod" "$root/go.sum" "$tmp/mod/"
cp -R "$root/api" "$tmp/mod/api"
find "$tmp/mod/api" -name zz_generated.deepcopy.go -delete
find "$tmp/mod/api/generated" -name '*.go' ! -name '*_test.go' -delete 2>/dev/null || true
run_generators "$tmp/mod" "$tmp/mod/conf/crd" || die "controller-gen failed"

if $verify; then
	stale=()
	while IFS= read -r f; do
		if [[ ! -f $root/$f ]]; then
			stale+=("$f (missing)")
		elif ! cmp -s "$tmp/mod/$f" "$root/$f"; then
			stale+=("$f (differs)")
		fi
	done < <(generated_files "$tmp/mod")
	while IFS= read -r f; do
		[[ -f $tmp/mod/$f ]] || stale+=("$f (no longer generated)")
	done < <(generated_files "$root")
	if ((${#stale[@]})); then
		printf 'generate: generated files are stale; run "make generate" and commit the result:\n' >&2
		printf '  %s\n' "${stale[@]}" >&2
		for f in "${stale[@]}"; do
			f=${f%% (*}
			[[ -f $root/$f && -f $tmp/mod/$f ]] && diff -u "$root/$f" "$tmp/mod/$f" | head -40 >&2
		done
		exit 1
	fi
	printf 'generate: deepcopy, CRD manifests and clients are up to date\n' >&2
	exit 0
fi

# Write back: deepcopy files next to their types, and conf/crd/*.yaml replaced as a set
# (conf/crd/testdata and other subdirectories are left alone).
changed=0
while IFS= read -r f; do
	[[ -f $tmp/mod/$f ]] && continue
	rm -f "$root/$f"
	printf 'generate: removed %s\n' "$f" >&2
	changed=$((changed + 1))
done < <(generated_files "$root")
while IFS= read -r f; do
	cmp -s "$tmp/mod/$f" "$root/$f" 2>/dev/null && continue
	mkdir -p "$(dirname "$root/$f")"
	cp "$tmp/mod/$f" "$root/$f"
	printf 'generate: wrote %s\n' "$f" >&2
	changed=$((changed + 1))
done < <(generated_files "$tmp/mod")
((changed)) || printf 'generate: nothing changed\n' >&2
