# SPDX-License-Identifier: MIT
# tests/mpi.mk - the mpi plugin under mpirun (tests/test-mpi.sh); skipped
# where MPI is not installed.
check_PROGRAMS += tests/mpi-check
tests_mpi_check_SOURCES = tests/mpi-check.c
tests_mpi_check_CPPFLAGS = $(AM_CPPFLAGS)
tests_mpi_check_LDADD = libcore/libloom.la
check_PROGRAMS += tests/mpi-meta
tests_mpi_meta_SOURCES = tests/mpi-meta.c
tests_mpi_meta_CPPFLAGS = $(AM_CPPFLAGS)
tests_mpi_meta_LDADD = model/libmodel.la libcore/libloom.la -lm
if HAVE_MPI
# An application that starts MPI itself (the plugin then borrows its
# world's error handler around each wait only).
check_PROGRAMS += tests/mpi-app
tests_mpi_app_SOURCES = tests/mpi-app.c
tests_mpi_app_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
tests_mpi_app_LDADD = libcore/libloom.la $(MPI_LIBS)
endif
EXTRA_DIST += tests/mpi-app.c
TESTS += tests/test-mpi.sh
EXTRA_DIST += tests/test-mpi.sh

# `make check-netns` (root only, not part of make check): the world across
# two network namespaces joined by a veth pair, as two hosts.
check-netns: all tests/mpi-check tests/mpi-meta
	@$(AM_TESTS_ENVIRONMENT) $(SHELL) $(top_srcdir)/tests/check-netns.sh
EXTRA_DIST += tests/check-netns.sh
