# SPDX-License-Identifier: MIT
# doc/local.mk - the plugin author's guide, the weight types, and the
# plugin template the guide builds on, installed with the headers (in
# docdir).
dist_doc_DATA = doc/plugin-guide.md doc/types.md
plugintemplatedir = $(docdir)/plugin-template
dist_plugintemplate_DATA = \
	examples/plugin-template/Makefile \
	examples/plugin-template/README \
	examples/plugin-template/my-plugin.c
