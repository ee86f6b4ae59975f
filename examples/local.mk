# SPDX-License-Identifier: MIT
# examples/local.mk - a small program that runs a GGUF model through the
# public API alone (loom.h, loom-model.h).
noinst_PROGRAMS += examples/generate
examples_generate_SOURCES = examples/generate.c
examples_generate_LDADD = model/libloom-model.la libcore/libloom.la
