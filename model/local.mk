# SPDX-License-Identifier: MIT
# model/local.mk - the model library, beside the core and using only
# its public API: GGUF files, vocabularies and tokenizers, the
# architectures' tables and graph builders, the KV cache and the
# reference.  A convenience library that loom-run, loom-bench and the
# tests link.
noinst_LTLIBRARIES += model/libmodel.la
model_libmodel_la_SOURCES = \
	model/gguf.h \
	model/gguf-read.c \
	model/gguf-write.c \
	model/model.h \
	model/arch.h \
	model/arch-table.c \
	model/hparams.c \
	model/load.c \
	model/split.c \
	model/decoder.h \
	model/decoder-int.h \
	model/decoder.c \
	model/weights.c \
	model/blocks.c \
	model/build-llama.c \
	model/build-gemma3.c \
	model/build-gpt-oss.c \
	model/reference.c \
	model/save.c \
	model/vocab.c \
	model/tokenizer.c \
	model/pretok.c \
	model/chat.c \
	model/unicode.h \
	model/unicode.c \
	model/unicode-data.c
model_libmodel_la_LIBADD = libcore/libloom.la -lm
EXTRA_DIST += model/gen-unicode.py

# The installed library: the API of include/loom/loom-model.h over the
# convenience library, whose own functions stay hidden.
lib_LTLIBRARIES += model/libloom-model.la
model_libloom_model_la_SOURCES = model/api.c model/sample.c
model_libloom_model_la_LDFLAGS = -version-info $(LOOM_MODEL_LT_VERSION) \
	-no-undefined $(NO_UNDEFINED) \
	-Wl,--version-script=$(srcdir)/model/libloom-model.sym
model_libloom_model_la_LIBADD = model/libmodel.la libcore/libloom.la -lm
EXTRA_model_libloom_model_la_DEPENDENCIES = model/libloom-model.sym
EXTRA_DIST += model/libloom-model.sym
