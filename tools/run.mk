# SPDX-License-Identifier: MIT
# tools/run.mk - loom-run: runs a GGUF model and reports its speed.
bin_PROGRAMS += tools/loom-run
tools_loom_run_SOURCES = tools/loom-run.c tools/app-world.h tools/app-world.c \
	tools/app-devices.h tools/app-devices.c
tools_loom_run_LDADD = model/libloom-model.la libcore/libloom.la -lm
EXTRA_DIST += tools/compare-llama-cpp.py tools/accuracy-smollm2.py
