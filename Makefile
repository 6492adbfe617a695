# io-harness for Go. The two commands a newcomer needs:
#   make demo   run the quickstart on its embedded scripted model (no key needed)
#   make test   everything CI runs: checks, the race-enabled test suite, fuzzing
# Other targets: make check, make fuzz, make bench.

GO       ?= go
FUZZTIME ?= 4s
# Packages built without cgo on every OS and architecture we claim.
PURE_PKGS = ./pkg/...
PLATFORMS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64

.PHONY: all demo test check unit fuzz bench deps tools-bench

all: test

demo:
	$(GO) run ./examples/quickstart

test: deps check unit fuzz

# deps installs what a fresh Debian machine lacks for the tests. Go itself
# and gcc (for -race) come with the machine.
deps:
	@command -v gcc >/dev/null || $(call apt,gcc)
	$(GO) mod download

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

unit:
	$(GO) test -race -count=1 -timeout 15m ./...

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
bench: tools-bench
	$(GO) test -run '^$$' -bench . -benchtime 200x ./pkg/harness/
	$(GO) test -run '^$$' -bench . -benchtime 5x ./pkg/harness/tool/
	@if [ -d bench ]; then cd bench && $(GO) test -run '^$$' -bench . -benchmem; fi

tools-bench:
	@command -v rg >/dev/null || $(call apt,ripgrep)

# apt installs a Debian package, refreshing the index once.
apt = (echo "installing $(1)"; \
	if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $(1))
