# model/local.mk - model files and architectures beside the core, using
# only the public API: the GGUF reader and writer, and the Llama/Qwen
# builders over examples/llama.  A convenience library that loom-run,
# loom-bench and the tests link.
noinst_LTLIBRARIES += model/libmodel.la
model_libmodel_la_SOURCES = \
	model/gguf.h \
	model/gguf-read.c \
	model/gguf-write.c
model_libmodel_la_LIBADD = libcore/libloom.la
