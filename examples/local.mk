# SPDX-License-Identifier: MIT
# examples/local.mk - a model written against the API: the Llama-style
# builder (a convenience library that loom-bench and tests reuse) and a
# small program that runs it.
noinst_LTLIBRARIES += examples/libllama.la
examples_libllama_la_SOURCES = \
	examples/llama/llama.h \
	examples/llama/llama.c \
	examples/llama/reference.c
examples_libllama_la_LIBADD = libcore/libloom.la -lm

noinst_PROGRAMS += examples/llama/run
examples_llama_run_SOURCES = examples/llama/run.c
examples_llama_run_LDADD = examples/libllama.la libcore/libloom.la -lm
