# SPDX-License-Identifier: MIT
# plugins/mpi/local.mk - the mpi plugin: the world of an SPMD job (rank,
# size, host-memory collectives) for tensor parallelism across processes.
# The only part of Loom that links MPI.
EXTRA_DIST += plugins/mpi/mpi-plugin.c plugins/mpi/mpi-coll.c \
	plugins/mpi/mpi-private.h
if HAVE_MPI
plugin_LTLIBRARIES += plugins/mpi/loom-mpi.la

plugins_mpi_loom_mpi_la_SOURCES = \
	plugins/mpi/mpi-private.h \
	plugins/mpi/mpi-plugin.c \
	plugins/mpi/mpi-coll.c
plugins_mpi_loom_mpi_la_CPPFLAGS = $(AM_CPPFLAGS) $(MPI_CFLAGS)
plugins_mpi_loom_mpi_la_LDFLAGS = $(PLUGIN_LINK_FLAGS)
plugins_mpi_loom_mpi_la_LIBADD = $(PLUGIN_LINK_LIBS) $(MPI_LIBS)
endif
