# oomlab build: one make for the binary, the CUDA plugin (when nvcc is found), tests and benchmarks.
#   make                 build/oomlab (and build/oomlab-cuda.so if CUDA=auto finds nvcc, or CUDA=1)
#   make run             run every scenario on the simulated RTX 5090
#   make test            build and run the TAP suite with prove   (SANITIZE=1: ASan + UBSan build)
#   make bench           Google Benchmark microbenchmarks
#   make test-recorder   the Python recorder's TAP tests (needs torch: PYTHON=.venv/bin/python by default)
#   make cuda            the CUDA plugin alone (make run skips it on a machine without a GPU)
#   make install         bin/oomlab, lib/oomlab/oomlab-cuda.so, the man page and completions under
#                        $(DESTDIR)$(PREFIX) (PREFIX=/usr/local)
#   make clang           the binary and the tests built with clang, into build/clang (CI checks both compilers)
#   make fuzz            every libFuzzer target for FUZZ_SECONDS each (default 600), one after another
#   make fuzz-ci         the same for FUZZ_CI_SECONDS each (default 25), as CI runs it
CC       ?= gcc
CXX      ?= g++
CUDA     ?= auto
SANITIZE ?=
PKGS     := yaml-0.1 hwloc jansson libbsd openblas zlib libxml-2.0 cairo
TEST_PKGS := expat
SHARED   ?= $(abspath ../shared)
PREFIX   ?= /usr/local
VERSION  := 0.9.0
GIT_REV  := $(shell git rev-parse --short HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -dirty)
# A GPU here: the driver's device nodes (make run builds the plugin only then)
HAVE_GPU := $(wildcard /dev/nvidia0)

ifeq ($(SANITIZE),1)
BUILD    := build/san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
OPT      := -O1
else
BUILD    := build
SANFLAGS :=
OPT      := -O2
endif

# A fresh machine gets its build dependencies installed before anything else is evaluated.
DEPS_OK := $(shell pkg-config --exists $(PKGS) $(TEST_PKGS) benchmark && test -f /usr/include/uthash.h && test -f /usr/include/oneapi/dnnl/dnnl.h && command -v prove >/dev/null && echo yes)
ifneq ($(DEPS_OK),yes)
$(info make: build dependencies missing; running scripts/install-deps)
DEPS_LOG := $(shell scripts/install-deps >&2 || echo failed)
ifeq ($(DEPS_LOG),failed)
$(error scripts/install-deps failed; install the packages it names and retry)
endif
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# The BLAS is not linked: kernels/cpu/blas.c loads it at run time, when a host kernel first needs it, from
# the directory pkg-config names (by its soname elsewhere). Only the benchmarks, which call it directly, link it.
# Nor is oneDNN (libdnnl.so.2): kernels/cpu/dnnl_lib.c opens it for the first convolution.
# Nor are cairo and libxml2: harness/report/cairo_lib.c and xml_lib.c open them for the first picture and
# the first JUnit file, so a run without either does not map them (about 1.7 ms of every process's start).
PKG_LIBS   := $(shell pkg-config --libs $(filter-out openblas cairo libxml-2.0,$(PKGS)) 2>/dev/null)
BLAS_LIBS  := $(shell pkg-config --libs openblas 2>/dev/null)
BLAS_SO    := $(firstword $(wildcard $(patsubst %/,%,$(shell pkg-config --variable=libdir openblas 2>/dev/null))/libopenblas.so.0) libopenblas.so.0)
CFLAGS   += -std=gnu11 $(OPT) -g -Wall -Wextra -Wno-unused-parameter -Wshadow -MMD -MP \
            -Iharness -Ikernels $(PKG_CFLAGS) $(SANFLAGS) -DOOMLAB_CUDA_PLUGIN_NAME='"oomlab-cuda.so"' \
            -DOOMLAB_VERSION='"$(VERSION)$(if $(GIT_REV), ($(GIT_REV)))"'
LDLIBS   += $(PKG_LIBS) -ldl -lm -lpthread
LDFLAGS  += $(SANFLAGS)

# Turing (T4), Ampere (A100), Ada (L4, RTX 4090), Hopper (H100/H200), Blackwell (RTX 5090), plus PTX for newer GPUs.
NVCC_ARCHS := -gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 \
              -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90,code=sm_90 \
              -gencode arch=compute_120,code=[sm_120,compute_120]
NVCC := $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
ifeq ($(CUDA),0)
  WANT_CUDA :=
else ifeq ($(CUDA),1)
  WANT_CUDA := 1
  ifeq ($(NVCC),)
    $(error CUDA=1 but nvcc was not found (looked on PATH and in /usr/local/cuda/bin))
  endif
else
  WANT_CUDA := $(if $(NVCC),1,)
endif

LIB_SRCS  := $(filter-out harness/main.c,$(shell find harness kernels -name '*.c' | sort))
LIB_OBJS  := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
TEST_SRCS := $(sort $(wildcard tests/*_test.c))
TESTS     := $(TEST_SRCS:tests/%_test.c=$(BUILD)/tests/%.t)
BENCH_SRCS := $(sort $(wildcard bench/*.cc))
CUDA_SRCS := $(shell find harness kernels -name '*.cu' | sort)
CUDA_OBJS := $(CUDA_SRCS:%.cu=$(BUILD)/obj/%.cu.o)

.SECONDEXPANSION:
.PHONY: all run cuda test tests test-recorder bench clean install clang fuzz fuzz-ci fuzz-build
all: $(BUILD)/oomlab $(if $(and $(WANT_CUDA),$(CUDA_SRCS)),$(BUILD)/oomlab-cuda.so)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# Kernels: -O3 and -fopenmp-simd vectorize the elementwise loops, -fno-math-errno lets them call
# libmvec's vector expf/erff, -fno-trapping-math lets branch-free selects around float ops
# vectorize (the kernels never read errno or FP exception flags; no result changes).
$(BUILD)/obj/kernels/%.o: CFLAGS += $(if $(SANITIZE),,-O3) -fno-math-errno -fno-trapping-math -fopenmp-simd
$(BUILD)/obj/kernels/cpu/blas.o: CFLAGS += -DOOMLAB_BLAS_LIB='"$(BLAS_SO)"'

$(BUILD)/liboomlab.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/oomlab: $(BUILD)/obj/harness/main.o $(BUILD)/liboomlab.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BUILD)/tests/%.t: tests/%_test.c tests/tap.h $(BUILD)/liboomlab.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $< $(BUILD)/liboomlab.a $(LDFLAGS) $(LDLIBS) -o $@

# Stand-ins for GPU libraries (tests/standin/): shared objects the tests load in place of the driver's, so the
# code around them is tested on machines without a GPU.
STANDINS := $(BUILD)/tests/libnvml-standin.so
$(BUILD)/tests/lib%-standin.so: tests/standin/%_standin.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -fPIC -shared $< -o $@
# The CUDA runtime, cuBLAS and cuDNN stand-ins carry the sonames and symbol versions the plugin was linked
# against, so LD_LIBRARY_PATH puts them in place of the real ones (built with the plugin, from CUDA's headers).
CUDA_STANDIN_DIR := $(BUILD)/tests/cuda-standin
CUDA_STANDIN_LIBS := cudart.so.13 cublas.so.13 cudnn.so.9
ifneq ($(and $(WANT_CUDA),$(CUDA_SRCS)),)
STANDINS += $(CUDA_STANDIN_LIBS:%=$(CUDA_STANDIN_DIR)/lib%)
endif
$(CUDA_STANDIN_DIR)/lib%: tests/standin/$$(firstword $$(subst ., ,%))_standin.c
	@mkdir -p $(dir $@)
	printf 'lib%s { global: *; };\n' '$*' > $@.map
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Wno-unused-parameter -fPIC -shared -I/usr/local/cuda/include $< -o $@ \
	    -Wl,-soname,lib$* -Wl,--version-script,$@.map

# The pictures' test parses the SVGs it writes with expat (the binary does not need it).
$(BUILD)/tests/pictures.t: CFLAGS += $(shell pkg-config --cflags $(TEST_PKGS) 2>/dev/null)
$(BUILD)/tests/pictures.t: LDLIBS += $(shell pkg-config --libs $(TEST_PKGS) 2>/dev/null)

# The CUDA plugin: device code and host glue compiled by nvcc, linked against cudart, cuBLAS, cuDNN;
# -z defs makes a missing symbol (a kernel without its cuda_<name>) a link error, not a dlopen failure.
$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O2 $(NVCC_ARCHS) -Xcompiler -fPIC -Xcompiler -fvisibility=hidden -MMD -MP -MF $(@:.o=.d) -Iharness -Ikernels -c $< -o $@

$(BUILD)/oomlab-cuda.so: $(CUDA_OBJS)
	$(NVCC) -shared $^ -o $@ -L/usr/local/cuda/lib64 -Xlinker -rpath -Xlinker /usr/local/cuda/lib64 -Xlinker -z \
	    -Xlinker defs -lcudart -lcublas -lcudnn

# The CUDA kernel table's test reads the table kernels/cuda's objects hold (no GPU needed); without
# the CUDA build it is compiled without them and skips.
KERNELS_CUDA_OBJS := $(filter $(BUILD)/obj/kernels/%,$(CUDA_OBJS))
ifneq ($(and $(WANT_CUDA),$(CUDA_SRCS)),)
$(BUILD)/tests/kernels_cuda_table.t: tests/kernels_cuda_table_test.c tests/tap.h $(BUILD)/liboomlab.a $(KERNELS_CUDA_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DOOMLAB_CUDA_TABLE -Itests -c $< -o $(@:.t=.o)
	$(CXX) $(LDFLAGS) $(@:.t=.o) $(KERNELS_CUDA_OBJS) $(BUILD)/liboomlab.a $(LDLIBS) -L/usr/local/cuda/lib64 \
	    -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -lcublas -lcudnn -o $@
endif

# Without a GPU the plugin could only report that there is none: make run does not spend minutes on it.
run: $(BUILD)/oomlab $(if $(and $(HAVE_GPU),$(WANT_CUDA),$(CUDA_SRCS)),$(BUILD)/oomlab-cuda.so)
	@$(if $(HAVE_GPU),,$(if $(WANT_CUDA),echo "make run: no GPU here (no /dev/nvidia0) so the CUDA plugin is not built; 'make cuda' builds it" >&2))
	@mkdir -p results/fresh
	$(BUILD)/oomlab run --json results/fresh/run.json --csv results/fresh/run.csv scenarios/ | tee results/fresh/run.txt
	$(BUILD)/oomlab stress --json results/fresh/stress.json --csv results/fresh/stress.csv scenarios/stress/ | tee results/fresh/stress.txt

# ASAN_OPTIONS: LeakSanitizer (gcc 12) crashes at exit walking the dynamic TLS of oneDNN's OpenMP threads
# ("Tracer caught signal 11" after a convolution on two or more cores) unless __tls_get_addr is left alone.
test: all $(TESTS) $(STANDINS)
	OOMLAB_SHARED=$(SHARED) OOMLAB_BIN=$(abspath $(BUILD)/oomlab) OOMLAB_SANITIZE=$(SANITIZE) \
	    OOMLAB_STANDINS=$(abspath $(BUILD)/tests) \
	    LSAN_OPTIONS=suppressions=$(abspath tests/lsan.supp) ASAN_OPTIONS=intercept_tls_get_addr=0 \
	    prove --exec '' -j2 $(TESTS) tests/*.sh

cuda: $(BUILD)/oomlab-cuda.so

# The man page and completions come from the binary's own command table and --help texts.
$(BUILD)/oomlab.1: $(BUILD)/oomlab
	$(BUILD)/oomlab help --man > $@.tmp && mv $@.tmp $@
$(BUILD)/oomlab.bash $(BUILD)/_oomlab: $(BUILD)/oomlab
	$(BUILD)/oomlab help --completion bash > $(BUILD)/oomlab.bash
	$(BUILD)/oomlab help --completion zsh > $(BUILD)/_oomlab

install: all $(BUILD)/oomlab.1 $(BUILD)/oomlab.bash $(BUILD)/_oomlab
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
	    $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 755 $(BUILD)/oomlab $(DESTDIR)$(PREFIX)/bin/oomlab
	$(if $(wildcard $(BUILD)/oomlab-cuda.so),install -d $(DESTDIR)$(PREFIX)/lib/oomlab && \
	    install -m 755 $(BUILD)/oomlab-cuda.so $(DESTDIR)$(PREFIX)/lib/oomlab/oomlab-cuda.so)
	install -m 644 $(BUILD)/oomlab.1 $(DESTDIR)$(PREFIX)/share/man/man1/oomlab.1
	install -m 644 $(BUILD)/oomlab.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/oomlab
	install -m 644 $(BUILD)/_oomlab $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_oomlab

# The recorder (python/oomlab_recorder) is tested apart: its tests need torch, `make test` needs no Python.
PYTHON ?= .venv/bin/python
test-recorder:
	prove --exec '$(PYTHON)' python/tests/*.t

$(BUILD)/bench/%: bench/%.cc $(wildcard bench/*.h) $(BUILD)/liboomlab.a
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -Iharness -Ikernels $(PKG_CFLAGS) $< $(BUILD)/liboomlab.a $(PKG_LIBS) $(BLAS_LIBS) -lbenchmark -lpthread -ldl -lm -o $@

# With torch importable ($(PYTHON), else python3), bench/torch_peer.py times the host kernels beside PyTorch CPU.
bench: all $(BENCH_SRCS:bench/%.cc=$(BUILD)/bench/%)
	@for b in $(BENCH_SRCS:bench/%.cc=$(BUILD)/bench/%); do OOMLAB_SHARED=$(SHARED) $$b || exit 1; done
	@py=$$(command -v $(PYTHON) || command -v python3); \
	if [ -n "$$py" ] && "$$py" -c 'import torch' 2>/dev/null; then "$$py" bench/torch_peer.py $(BUILD)/bench/host_kernels_bench; \
	else echo "make bench: torch is not importable ($(PYTHON) or python3): no PyTorch CPU peer run"; fi

# The committed fuzz inputs replayed through the fuzz targets' entry points by the ordinary test build.
FUZZ_SRCS := $(sort $(wildcard fuzz/*_fuzz.c))
$(BUILD)/obj/fuzz/%.o: fuzz/%.c fuzz/fuzz.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFUZZ_REPLAY -c $< -o $@

$(BUILD)/tests/fuzz_replay.t: tests/fuzz_replay_test.c tests/tap.h $(FUZZ_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/liboomlab.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests -Ifuzz $< $(FUZZ_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/liboomlab.a $(LDFLAGS) $(LDLIBS) -o $@

tests: $(TESTS) $(STANDINS)

clang:
	$(MAKE) CC=clang CUDA=0 BUILD=build/clang all tests

# ---- fuzzing: clang's libFuzzer with ASan + UBSan (packages: scripts/install-deps fuzz) ----
# Each fuzz/NAME_fuzz.c is a target build/fuzz/NAME; the library is the harness and the kernels (the
# kernel table the time model reads links their CPU side; no target runs a kernel) built with coverage
# instrumentation. fuzz/run runs one on its seed corpus.
FUZZ_BUILD      := build/fuzz
FUZZ_SECONDS    ?= 600
FUZZ_CI_SECONDS ?= 25
FUZZ_NAMES      := $(FUZZ_SRCS:fuzz/%_fuzz.c=%)
FUZZ_SAN        := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS     := -std=gnu11 -O1 -g -Wall -Wextra -Wno-unused-parameter -Wshadow -MMD -MP -Iharness -Ikernels \
                   -Ifuzz $(PKG_CFLAGS) $(FUZZ_SAN) -DOOMLAB_CUDA_PLUGIN_NAME='"oomlab-cuda.so"'
FUZZ_LIB_OBJS   := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(LIB_SRCS))

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_BUILD)/liboomlab-fuzz.a: $(FUZZ_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/%: fuzz/%_fuzz.c fuzz/fuzz.h $(FUZZ_BUILD)/liboomlab-fuzz.a
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer $< $(FUZZ_BUILD)/liboomlab-fuzz.a $(LDLIBS) -o $@

fuzz-build: $(FUZZ_NAMES:%=$(FUZZ_BUILD)/%)

fuzz: fuzz-build
	@for t in $(FUZZ_NAMES); do OOMLAB_SHARED=$(SHARED) FUZZ_BUILD=$(FUZZ_BUILD) fuzz/run $$t $(FUZZ_SECONDS) || exit 1; done

fuzz-ci:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(FUZZ_CI_SECONDS)

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
