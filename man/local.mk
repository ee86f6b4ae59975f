# SPDX-License-Identifier: MIT
# man/local.mk - the manual pages, written by hand in roff.
dist_man1_MANS = \
	man/loom-info.1 \
	man/loom-bench.1 \
	man/loom-run.1 \
	man/loom-conformance.1
dist_man7_MANS = man/loom.7
