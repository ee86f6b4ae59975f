# SPDX-License-Identifier: MIT
# plugins/meta/local.mk - the meta plugin: tensor parallelism over any set
# of devices.
plugin_LTLIBRARIES += plugins/meta/loom-meta.la

plugins_meta_loom_meta_la_SOURCES = \
	plugins/meta/meta.h \
	plugins/meta/meta-plan.h \
	plugins/meta/meta-plugin.c \
	plugins/meta/meta-state.c \
	plugins/meta/meta-split.c \
	plugins/meta/meta-policy.c \
	plugins/meta/meta-buffer.c \
	plugins/meta/meta-rules.h \
	plugins/meta/meta-rules.c \
	plugins/meta/meta-plan.c \
	plugins/meta/meta-backend.c \
	plugins/meta/meta-world.c
plugins_meta_loom_meta_la_CPPFLAGS = $(AM_CPPFLAGS)
plugins_meta_loom_meta_la_LDFLAGS = $(PLUGIN_LINK_FLAGS)
plugins_meta_loom_meta_la_LIBADD = $(PLUGIN_LINK_LIBS) -lpthread -lm
EXTRA_DIST += plugins/meta/README.md
