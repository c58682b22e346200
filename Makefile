# lmc - build, test, demo. `make` leaves ./lmc and liblmc.{a,so} in the repository root.
CC      ?= gcc
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wpointer-arith -Wvla
CPPFLAGS += -Iinclude -Ilib/common -Ilib/encode -Ilib/decode -Ilib/container -Ilib
LDLIBS  := -ljansson -lpthread -lm
PREFIX  ?= /usr/local

LIB_SRC := $(wildcard lib/common/*.c lib/encode/*.c lib/decode/*.c lib/container/*.c lib/store/*.c)
LIB_OBJ := $(LIB_SRC:%.c=build/%.o)
LIB_PIC := $(LIB_SRC:%.c=build/pic/%.o)
CLI_SRC := $(wildcard programs/*.c)

.PHONY: all lib clean test test-unit test-cli test-python demo bench fuzz install deps asan tsan memcheck

all: lmc liblmc.so

lib: liblmc.a liblmc.so

build/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -fvisibility=hidden -MMD -MP -c $< -o $@

build/pic/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -fvisibility=hidden -fPIC -MMD -MP -c $< -o $@

# The encoder at -O3: 2026-12-04, in memory, one thread, traj-3m deltas, best of 20,
# alternated: bf16 +3.5 %, fp32 +8 %, moments +6 % compressing, the frames identical.
# Not the decoder: refctx_dec.c's hand-scheduled loops lost up to half at -O3.
# A CFLAGS given on the command line (make asan, tsan) replaces this too.
build/lib/encode/%.o build/pic/lib/encode/%.o: CFLAGS += -O3

# XXH3's long-input loop with AVX2 and AVX-512; only called after a run-time CPU check.
# The compiler's target decides, not the build machine (a cross-compiler for aarch64 has no -mavx2).
ifneq ($(filter x86_64-%,$(shell $(CC) -dumpmachine)),)
build/lib/common/hash_avx2.o build/pic/lib/common/hash_avx2.o: CFLAGS += -mavx2
build/lib/common/hash_avx512.o build/pic/lib/common/hash_avx512.o: CFLAGS += -mavx512f -mavx2
endif

liblmc.a: $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

liblmc.so: $(LIB_PIC)
	$(CC) -shared -o $@ $^ $(LDLIBS)

lmc: $(CLI_SRC) liblmc.a include/lmc.h
	$(CC) $(CFLAGS) $(WARN) -Iinclude $(CLI_SRC) liblmc.a $(LDLIBS) -o $@

clean:
	rm -rf build lmc liblmc.a liblmc.so tests/*.bin

-include $(LIB_OBJ:.o=.d) $(LIB_PIC:.o=.d)

# ---- tests -------------------------------------------------------------
TEST_SRC  := $(wildcard tests/test_*.c)
TEST_BIN  := $(TEST_SRC:tests/%.c=build/tests/%)
TEST_LIBS := $(LDLIBS) -lcmocka

build/tests/%: tests/%.c liblmc.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) $< liblmc.a $(TEST_LIBS) -o $@

deps:
	@sh tools/deps.sh

# Unit tests (cmocka), then CLI tests. `make test` installs what it needs first.
test: deps
	$(MAKE) all $(TEST_BIN)
	@$(MAKE) --no-print-directory test-unit test-cli test-python

test-unit: $(TEST_BIN)
	@set -e; for t in $(TEST_BIN); do echo "== $$t"; ./$$t; done

# every tests/*_test.sh takes the lmc binary as its argument and ends with "N passed, M failed"
test-cli: lmc
	@set -e; for t in tests/*_test.sh; do echo "== $$t"; bash $$t ./lmc; done

# Python binding tests (Debian's python3-torch through /usr/bin/python3)
test-python: all
	@if [ -d tests/python ]; then sh tools/deps.sh python3-torch && \
	  PYTHONPATH=python /usr/bin/python3 -m unittest discover -s tests/python -t . -v; fi

# The REFCTX decoder's AVX2 token loop is inline asm, which sanitizer builds
# leave out (they cannot see into it): memcheck watches its reads and writes
# on test_refctx's hostile and random blocks, in every CPU mode, in a normal
# build; test_codec's block tests (ANS1's hostile blocks among them) run in
# the same normal build too.
memcheck: build/tests/test_refctx build/tests/test_codec
	sh tools/deps.sh valgrind
	valgrind -q --error-exitcode=9 build/tests/test_refctx
	valgrind -q --error-exitcode=9 build/tests/test_codec

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer.
asan:
	$(MAKE) clean
	$(MAKE) CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" LDFLAGS=-fsanitize=address,undefined all $(TEST_BIN)
	$(MAKE) --no-print-directory CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" test-unit test-cli

# Threaded tests under ThreadSanitizer (a clean build, like asan).
tsan:
	$(MAKE) clean
	$(MAKE) CFLAGS="-O1 -g -fsanitize=thread -fno-omit-frame-pointer" lmc build/tests/test_stream build/tests/test_errors build/tests/test_regressions build/tests/test_pool
	bash tests/tsan.sh

# Every fuzz target for FUZZ_SECS seconds (CI: 60); crashes land in fuzz/regressions/.
FUZZ_SECS ?= 60
fuzz:
	bash fuzz/ci.sh $(FUZZ_SECS)

# ---- demo --------------------------------------------------------------
demo: deps
	$(MAKE) all
	@bash tools/demo.sh

# ---- install -----------------------------------------------------------
# The Python package goes where Debian's /usr/bin/python3 looks: dist-packages
# of python3 for PREFIX=/usr, the versioned one under other prefixes.
PYVER  := $(shell /usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYSITE ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/python$(PYVER)/dist-packages)

install: lmc liblmc.a liblmc.so
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PYSITE)/lmc
	install -m 755 lmc $(DESTDIR)$(PREFIX)/bin/lmc
	install -m 644 liblmc.a $(DESTDIR)$(PREFIX)/lib/liblmc.a
	install -m 755 liblmc.so $(DESTDIR)$(PREFIX)/lib/liblmc.so
	install -m 644 include/lmc.h $(DESTDIR)$(PREFIX)/include/lmc.h
	install -m 644 python/lmc/*.py $(DESTDIR)$(PYSITE)/lmc/
	@if [ -z "$(DESTDIR)" ] && command -v ldconfig >/dev/null 2>&1; then ldconfig; fi

-include bench/Makefile.inc
