# SPDX-License-Identifier: MIT
# model/local.mk - model files and architectures beside the core, using
# only the public API: the GGUF reader and writer, and the Llama/Qwen
# builders over examples/llama.  A convenience library that loom-run,
# loom-bench and the tests link.
noinst_LTLIBRARIES += model/libmodel.la
model_libmodel_la_SOURCES = \
	model/gguf.h \
	model/gguf-read.c \
	model/gguf-write.c \
	model/model.h \
	model/arch.c \
	model/save.c \
	model/vocab.c \
	model/tokenizer.c \
	model/pretok.c \
	model/chat.c \
	model/unicode.h \
	model/unicode.c \
	model/unicode-data.c
model_libmodel_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/examples/llama
model_libmodel_la_LIBADD = examples/libllama.la libcore/libloom.la
EXTRA_DIST += model/gen-unicode.py
