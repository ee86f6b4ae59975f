# SPDX-License-Identifier: MIT
# tests/model.mk - model files and architectures: the GGUF reader and
# writer (with corrupted files and the fuzz corpus), and each
# architecture loaded from a generated file against the reference and on
# meta devices; the tokenizer.
check_PROGRAMS += tests/test-gguf tests/fuzz-gguf tests/test-model \
	tests/test-tokenizer tests/test-vocab tests/test-chat
TESTS += tests/test-gguf tests/fuzz-gguf tests/test-model \
	tests/test-tokenizer tests/test-vocab tests/test-chat

# The model tests/test-run.sh talks to: its next token is a function of
# the last (see the file).
check_PROGRAMS += tests/chat-model
tests_chat_model_SOURCES = tests/chat-model.c
tests_chat_model_CPPFLAGS = $(TEST_CPPFLAGS)
tests_chat_model_LDFLAGS = -no-install
tests_chat_model_LDADD = model/libmodel.la libcore/libloom.la

# llama.cpp's vocabulary files and their expected ids, when
# LOOM_VOCAB_DIR names them (skipped otherwise; see the file).
tests_test_vocab_SOURCES = tests/test-vocab.c
tests_test_vocab_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/model
tests_test_vocab_LDFLAGS = -no-install
tests_test_vocab_LDADD = model/libmodel.la $(TEST_LIBS)

tests_test_chat_SOURCES = tests/test-chat.c
tests_test_chat_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/model
tests_test_chat_LDFLAGS = -no-install
tests_test_chat_LDADD = model/libmodel.la $(TEST_LIBS)

tests_test_tokenizer_SOURCES = tests/test-tokenizer.c
tests_test_tokenizer_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/model
tests_test_tokenizer_LDFLAGS = -no-install
tests_test_tokenizer_LDADD = model/libmodel.la $(TEST_LIBS)

tests_test_model_SOURCES = tests/test-model.c
tests_test_model_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/model
tests_test_model_LDFLAGS = -no-install
tests_test_model_LDADD = model/libmodel.la $(TEST_LIBS)

tests_test_gguf_SOURCES = tests/test-gguf.c
tests_test_gguf_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_gguf_LDFLAGS = -no-install
tests_test_gguf_LDADD = model/libmodel.la $(TEST_LIBS)

# The fuzz target, built as a replayer of its corpus (clang's
# -fsanitize=fuzzer builds the same file as a fuzzer; see the file).
tests_fuzz_gguf_SOURCES = tests/fuzz-gguf.c
tests_fuzz_gguf_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/model \
	-DFUZZ_REPLAY \
	-DFUZZ_CORPUS='"$(abs_top_srcdir)/tests/fuzz-gguf-corpus"'
tests_fuzz_gguf_LDFLAGS = -no-install
tests_fuzz_gguf_LDADD = model/libmodel.la $(TEST_LIBS)
EXTRA_DIST += tests/fuzz-gguf-corpus

# gpt-oss's metadata as llama.cpp's writer names it.
check_PROGRAMS += tests/test-gpt-oss
TESTS += tests/test-gpt-oss
tests_test_gpt_oss_SOURCES = tests/test-gpt-oss.c
tests_test_gpt_oss_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/model
tests_test_gpt_oss_LDFLAGS = -no-install
tests_test_gpt_oss_LDADD = model/libmodel.la $(TEST_LIBS)

# An application of the public API (examples/generate.c) built against the
# headers alone, on a file loom-bench saves, against loom-run.
TESTS += tests/test-model-api.sh
EXTRA_DIST += tests/test-model-api.sh

# The public API's calls and misuses, and the sampler.
check_PROGRAMS += tests/test-model-lib
TESTS += tests/test-model-lib
tests_test_model_lib_SOURCES = tests/test-model-lib.c tests/test-util.c \
	tests/test-util.h
tests_test_model_lib_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_model_lib_LDFLAGS = -no-install
tests_test_model_lib_LDADD = model/libloom-model.la model/libmodel.la \
	$(TEST_LIBS)
