# tools/info.mk - loom-info: what the loader found and why.
bin_PROGRAMS += tools/loom-info
tools_loom_info_SOURCES = tools/loom-info.c
tools_loom_info_LDADD = libcore/libloom.la

# The out-of-tree plugin template ships in the tarball but is not built
# here: it builds against an installed Loom (see its Makefile).
EXTRA_DIST += \
	examples/plugin-template/Makefile \
	examples/plugin-template/README \
	examples/plugin-template/my-plugin.c
