# SPDX-License-Identifier: MIT
# doc/local.mk - the documentation beyond the README and the manual
# pages (NEWS with its API renames, the API walk-through, the meta device's rules, the
# table of ops, the weight types, several devices
# and processes, benchmarks, accuracy, the GPU check, fuzzing), and the
# plugin author's guide with the plugin template it builds on, all
# installed in docdir.
dist_doc_DATA = \
	NEWS \
	doc/accuracy.md \
	doc/api.md \
	doc/benchmarks.md \
	doc/fuzzing.md \
	doc/gpu.md \
	doc/meta.md \
	doc/ops.md \
	doc/plugin-guide.md \
	doc/scale-out.md \
	doc/types.md
plugintemplatedir = $(docdir)/plugin-template
dist_plugintemplate_DATA = \
	examples/plugin-template/Makefile \
	examples/plugin-template/README \
	examples/plugin-template/my-plugin.c
