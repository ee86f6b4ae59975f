# SPDX-License-Identifier: MIT
# tools/info.mk - loom-info: what the loader found and why.
bin_PROGRAMS += tools/loom-info
tools_loom_info_SOURCES = tools/loom-info.c
tools_loom_info_LDADD = libcore/libloom.la

# The out-of-tree plugin template (installed by doc/local.mk) builds
# against an installed Loom with its own Makefile, which installcheck
# tries.

installcheck-local: installcheck-template
installcheck-template:
	rm -rf plugin-template-check
	cp -R $(srcdir)/examples/plugin-template plugin-template-check
	chmod -R u+w plugin-template-check
	cd plugin-template-check && \
		PKG_CONFIG_PATH='$(DESTDIR)$(libdir)/pkgconfig' \
		PKG_CONFIG_SYSROOT_DIR='$(DESTDIR)' $(MAKE) CC='$(CC)'
	LD_LIBRARY_PATH='$(DESTDIR)$(libdir)' LOOM_PLUGIN_SYSTEM_PATH= \
		LOOM_PLUGIN_PATH=plugin-template-check \
		'$(DESTDIR)$(bindir)/loom-info' | grep 'my *loaded'
	rm -rf plugin-template-check
.PHONY: installcheck-template
