# SPDX-License-Identifier: MIT
# examples/local.mk - a small program that runs a synthetic model of the
# model library.
noinst_PROGRAMS += examples/llama/run
examples_llama_run_SOURCES = examples/llama/run.c
examples_llama_run_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/model
examples_llama_run_LDADD = model/libmodel.la libcore/libloom.la -lm
