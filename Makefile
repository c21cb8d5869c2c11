# A thin wrapper over the CMake build; every real rule lives in CMakeLists.txt.
#   make deps      install missing Debian packages (as root), or say which
#   make           build (build/)
#   make test      deps + build + the fast tier (every type, every deployment
#                  once, the modes, the CLI; about 4 minutes on 2 cores)
#   make check     deps + build + everything: the fast tier, the deployment
#                  matrix, the suites over TLS and ACL, the safety scenarios
#                  (failovers of every type included), the allocation-failure run
#   make test-busy the fast tier beside two busy loops (BUSY_LOOPS), as on a
#                  machine where other work goes on; TIER=check for all
#   make sanitize  the suite under ASan+UBSan, the threaded tests under TSan
#   make demo      deps + build + processes taking turns on a lock
#   make safety    long fault-injection run (>= 1 000 000 guarded operations;
#                  SAFETY_TYPE=fair|rw|sem|latch for the other types)
#   make fuzz      libFuzzer on the parsers and reply readers (FUZZ_SECONDS)
#   make valgrind  the C tests under valgrind memcheck
#   make bench     benchmarks against the peers and the Redis ceiling
#   make deb       Debian packages (libdlock0, libdlock-dev, dlock, python3-dlock) with CPack
#                  into build-deb/packages/
#   make install   install library, header, dlock.pc, CMake package, the dlock
#                  command and its man page: PREFIX=/opt/dlock (default: the
#                  configured prefix, /usr/local), DESTDIR=/stage for packaging
BUILD_DIR ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
CTEST_FLAGS ?= --output-on-failure
# The tests mostly wait on Redis and on timers: four at a time on 2 cores.
CTEST_JOBS ?= 4
# The full tier's entries carry the CTest label "full" (tests/CMakeLists.txt).
FAST = -LE full
TIER ?= test

.PHONY: all build deps test check check-rest test-busy sanitize asan tsan demo install clean safety fuzz \
        valgrind bench deb

all: build

deps:
	@scripts/deps.sh

build:
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD_DIR) -j$(JOBS) -- --no-print-directory

test: deps build
	ctest --test-dir $(BUILD_DIR) $(CTEST_FLAGS) -j$(CTEST_JOBS) $(FAST)

check: deps build
	ctest --test-dir $(BUILD_DIR) $(CTEST_FLAGS) -j$(CTEST_JOBS)

# The full tier less the fast one: make test followed by this is make check.
check-rest: deps build
	ctest --test-dir $(BUILD_DIR) $(CTEST_FLAGS) -j$(CTEST_JOBS) -L full

test-busy: deps build
	scripts/busy.sh ctest --test-dir $(BUILD_DIR) $(CTEST_FLAGS) -j$(CTEST_JOBS) \
	  $(if $(filter check,$(TIER)),,$(FAST))

# Under the sanitizers the safety harness runs the scenarios whose fault paths
# differ most (kill -9, a server restart) for each type, and the failovers of
# the reentrant lock; make check runs all. The spin, non-reentrant,
# writer-first, rate, hand-over, barrier and revoke types are left to make
# check (their code runs under ASan in test_spin, test_nonreentrant,
# test_rw_writer_first, test_rate_limiter, test_rate_share's 10 s form,
# test_handover, test_barrier and test_revoke_request), and so are the whole
# suite's TLS and ACL replays and the TLS deployments (test_tls and test_acl
# run here), the other types' kill9 and restart scenarios, the lock-delay
# spreads and the lagging-replica failovers: the reentrant lock's kill9,
# restart and failovers stay (CI time: the ASan stage was the longest).
# The allocation-failure
# run is in: LeakSanitizer checks each of its children.
ASAN_SKIP ?= ^safety.*_(baseline|sigstop|pause|partition|ack|spread_delay)$$|^safety_(fair|rw|sem|latch|elect)_|^safety_failover_replicated_lag|^safety_(spin|rate|rw_wf|nonreentrant|handover|barrier|revoke)_|^suite_(tls|acl)$$|^test_[a-z]+_tls$$|^debian_packages$$|^test_cli_window_20$$|^test_rate_share_60s$$
ASAN_JOBS ?= 2
asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_SANITIZE=address,undefined >/dev/null
	@cmake --build build-asan -j$(JOBS) -- --no-print-directory
	DLOCK_TEST_SLOW=3 ctest --test-dir build-asan $(CTEST_FLAGS) -j$(ASAN_JOBS) -E '$(ASAN_SKIP)'

# ThreadSanitizer runs the threaded tests once each: the single-server suites,
# the Sentinel and Cluster suites, TLS, ACL, and the CLI's run modes (a guard,
# a watchdog and signals in one process). It leaves out what repeats the same
# threads over another transport or deployment (the deployment matrix, the
# suites over TLS and ACL, the TLS deployments), the CLI scripts that only
# read or write Redis once per command, the 60 s rate share (processes; its
# 10 s form stays) and the lost-lock window script (processes; run and tree
# stay): ASan and make check run those.
TSAN_SKIP ?= ^suite_|^test_(cluster|sentinel|managed)_tls$$|^test_[a-z]+_(sentinel|cluster)$$|^test_cli($$|_(admin|ops|family|sem|beyond|stripes|monitor|managed|doctor)$$)|^example_|^test_rate_share_60s$$|^test_cli_window$$
TSAN_JOBS ?= 2
tsan: deps
	@cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_SANITIZE=thread >/dev/null
	@cmake --build build-tsan -j$(JOBS) -- --no-print-directory
	DLOCK_TEST_SLOW=5 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --test-dir build-tsan -L threaded $(CTEST_FLAGS) -j$(TSAN_JOBS) -E '$(TSAN_SKIP)'

sanitize: asan tsan

demo: deps build
	@scripts/demo.sh $(BUILD_DIR)

# The long safety run: every fault scenario, then baseline operations until
# 1 000 000 guarded operations in all. Report: build/safety-report.txt.
# SAFETY_TYPE=fair|rw|sem|latch|elect runs the same with that type (report
# build/safety-report-<type>.txt); the fair lock serves ~100 holds/s, so give
# it a smaller SAFETY_MIN_OPS (0: the scenarios only). SAFETY_TYPE=rate (runs
# of dlock run --rate, 4 starts per 2 s: baseline, kill9, pause, restart)
# makes a few starts a second: give it SAFETY_MIN_OPS=0.
SAFETY_SECONDS ?= 60
SAFETY_TYPE ?= lock
SAFETY_MIN_OPS ?= 1000000
SAFETY_REPORT = $(BUILD_DIR)/safety-report$(if $(filter-out lock,$(SAFETY_TYPE)),-$(SAFETY_TYPE)).txt
safety: deps build
	@scripts/deps.sh iptables iproute2
	$(BUILD_DIR)/tests/safety/safety --type $(SAFETY_TYPE) --scenario all --seconds $(SAFETY_SECONDS) \
	  --procs 4 --threads 4 --names 3 --min-total-ops $(SAFETY_MIN_OPS) --report $(SAFETY_REPORT)

# libFuzzer (clang) on the URL/option parsers and every reply reader, for
# FUZZ_SECONDS each, starting from the corpus in tests/fuzz/corpus (read-only:
# new inputs go to build-fuzz/corpus-*).
FUZZ_SECONDS ?= 30
fuzz:
	@scripts/deps.sh clang libclang-rt-14-dev
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLOCK_FUZZ=ON \
	  -DDLOCK_SANITIZE=address,undefined -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_CLI=OFF \
	  -DDLOCK_BUILD_EXAMPLES=OFF >/dev/null
	@cmake --build build-fuzz -j$(JOBS) --target fuzz_url fuzz_reply -- --no-print-directory
	@for t in url reply; do \
	  mkdir -p build-fuzz/corpus-$$t; \
	  echo "fuzz_$$t: $(FUZZ_SECONDS) s"; \
	  build-fuzz/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=4096 \
	    -print_final_stats=1 build-fuzz/corpus-$$t tests/fuzz/corpus/$$t 2>&1 | \
	    grep -E "stat::number_of_executed_units|stat::new_units_added|ERROR|SUMMARY|Done" || exit 1; \
	done

# The C test binaries under valgrind memcheck: zero errors, zero leaks.
valgrind: deps build
	@scripts/deps.sh valgrind
	scripts/valgrind.sh $(BUILD_DIR)

# dlock, its peers (npm) and the Redis references side by side, one table:
# bench/RESULTS.md; the Python binding beside redis-py: bench/python/RESULTS.md.
# BENCH_PLACEMENT=same for one CPU; BENCH_QUICK=1 to smoke-test.
bench: deps
	@scripts/deps.sh redis-tools util-linux
	@command -v node >/dev/null && command -v npm >/dev/null || scripts/deps.sh nodejs npm
	@cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DDLOCK_BUILD_TESTS=OFF >/dev/null
	@cmake --build build-bench -j$(JOBS) --target dlock_bench dlock -- --no-print-directory
	bench/run.sh $(CURDIR)/build-bench

# PREFIX (or prefix) at install time, as make users expect; DESTDIR is put in
# front of every installed path (files land in $(DESTDIR)$(PREFIX)/...).
PREFIX ?= $(prefix)
install: build
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD_DIR) $(if $(PREFIX),--prefix "$(PREFIX)")

# Debian packages: a Release build for /usr (multiarch libdir), packed by
# CPack (cmake/packaging.cmake); dpkg-shlibdeps names the run-time dependencies.
DEB_BUILD_DIR ?= build-deb
deb: deps
	@scripts/deps.sh dpkg-dev file
	@cmake -S . -B $(DEB_BUILD_DIR) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
	  -DDLOCK_PC_RELOCATABLE=OFF -DDLOCK_BUILD_TESTS=OFF -DDLOCK_BUILD_EXAMPLES=OFF \
	  -DDLOCK_MAN_GZIP=ON -DDLOCK_INSTALL_PYTHON=ON >/dev/null
	@cmake --build $(DEB_BUILD_DIR) -j$(JOBS) -- --no-print-directory
	@rm -rf $(DEB_BUILD_DIR)/packages
	@cd $(DEB_BUILD_DIR) && cpack -G DEB >/dev/null
	@ls $(DEB_BUILD_DIR)/packages/*.deb

clean:
	rm -rf $(BUILD_DIR) build-asan build-tsan build-deb
