# mrcemu: two commands on a fresh machine, `make demo` and `make test`.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
MRCEMU := $(VENV)/bin/mrcemu
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: install test unit demo bench lint clean generate fuzz docs figures

BPF_OBJ := mrcemu/bpf/switch.o
USID_END_OBJ := mrcemu/bpf/usid_end.o
SHIM := mrcemu/verbs/shim/libmrcverbs.so
SHIM_SRC := $(wildcard mrcemu/verbs/shim/*.c) $(wildcard mrcemu/verbs/shim/*.h) \
            mrcemu/verbs/shim/libmrcverbs.map

install:
	@bash scripts/install-deps.sh
	@$(MAKE) --no-print-directory $(BPF_OBJ) $(USID_END_OBJ) $(SHIM)
	@$(SUDO) $(PY) -m mrcemu doctor --brief --again || true

# The verbs shim a program on an emulated host runs with (`mrcemu exec`, LD_PRELOAD):
# rdma-core's installed headers, the symbol versions its libibverbs gives each verb.
$(SHIM): $(SHIM_SRC)
	gcc -O2 -g -fPIC -shared -Wall -Wextra -Werror -fvisibility=hidden -o $@ \
	    $(filter %.c,$^) -Wl,--version-script=mrcemu/verbs/shim/libmrcverbs.map -lpthread

# The switch data plane: clang from Debian (installed above), loaded by bpftool.
$(BPF_OBJ): mrcemu/bpf/switch.c mrcemu/bpf/vq.h mrcemu/bpf/mrc_wire.h
	clang -O2 -g -Wall -target bpf -I/usr/include/$$(gcc -dumpmachine) -c $< -o $@

# The BPF engine's End with next-csid, for kernels without seg6local (docs/kernel.md).
$(USID_END_OBJ): mrcemu/bpf/usid_end.c mrcemu/datapath/mrc_shared.h
	clang -O2 -g -Wall -target bpf -I/usr/include/$$(gcc -dumpmachine) -c $< -o $@

# --durations: every CI log names the slowest tests, so the suite's 15-minute budget
# (2 cores) is watched from the logs rather than guessed.
test: install
	$(SUDO) $(PY) -m pytest -q -rs --durations=25 tests

unit: install
	$(PY) -m pytest -q tests/unit

# The main job: the failover scenario on the default fabric, MRC against RoCE.
# Slowed as this machine needs (`--slowdown auto`: a calibration, once per boot, of what
# a packet costs here picks the smallest slowdown expected to be faithful; the report
# says how). `make demo SLOWDOWN=1` runs it at full speed; the report says whether that
# was faithful.
SLOWDOWN ?= auto
demo: install
	$(SUDO) $(MRCEMU) run failover --slowdown $(SLOWDOWN) --out runs

# The documentation site (MkDocs, Material theme) into site/; tests/unit/test_docs.py
# builds it with --strict, so a broken link fails `make test`.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# BENCHMARKS.json (each section with when and at which commit it was measured) and
# BENCHMARKS.md from it; ONLY=TEXT reruns the sections whose title has TEXT. Then every
# figure README.md and docs/ take from a result file is written again.
bench: install
	$(SUDO) $(PY) scripts/bench.py --out BENCHMARKS.md $(if $(ONLY),--only "$(ONLY)")
	@$(MAKE) --no-print-directory figures

# README.md's and docs/'s generated regions, from the committed result files
# (scripts/figures.py); a test fails while one is stale.
figures: install
	$(PY) scripts/figures.py

# The compiled parser under libFuzzer + AddressSanitizer + UBSan (the tests run 1,000,000
# inputs; this runs FUZZ_RUNS). A crash leaves its input in build/fuzz/crash-*.
FUZZ_RUNS ?= 50000000
fuzz: install
	$(PY) scripts/fuzz.py --runs $(FUZZ_RUNS) --workdir build/fuzz
	$(PY) scripts/fuzz_loop.py --inputs 200000 --workdir build/fuzz-loop

# Files derived from the wire layout table (mrcemu/wire/layout.py); they are committed.
generate:
	$(PY) -m mrcemu.wire.generate
	$(PY) -m mrcemu.topology.sizes
	@$(MAKE) --no-print-directory $(BPF_OBJ) $(USID_END_OBJ) $(SHIM)

lint: install
	$(VENV)/bin/ruff check mrcemu tests scripts

clean:
	$(SUDO) $(MRCEMU) clean
