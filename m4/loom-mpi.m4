dnl SPDX-License-Identifier: MIT
dnl loom-mpi.m4 - finds MPI for the mpi plugin: pkg-config's mpi-c, else
dnl the compile and link lines of mpicc (Open MPI's --showme, MPICH's
dnl -compile_info/-link_info).  --with-mpi defaults to "check".
dnl
dnl Sets MPI_CFLAGS, MPI_LIBS and the conditional HAVE_MPI.

AC_DEFUN([LOOM_CHECK_MPI], [
AC_ARG_WITH([mpi],
  [AS_HELP_STRING([--with-mpi],
    [build the mpi plugin (default: check pkg-config mpi-c and mpicc)])],
  [], [with_mpi=check])
have_mpi=no
loom_mpi_summary="no (disabled)"
AS_IF([test "x$with_mpi" != xno], [
  loom_mpi_summary="no (MPI not found)"
  AS_IF([test -z "$MPI_LIBS"], [
    PKG_CHECK_MODULES([MPI], [mpi-c], [loom_mpi_how="pkg-config mpi-c"], [
      AC_PATH_PROG([MPICC], [mpicc], [])
      AS_IF([test -n "$MPICC"], [
        AS_IF([$MPICC --showme:compile >/dev/null 2>&1], [
          MPI_CFLAGS=`$MPICC --showme:compile`
          MPI_LIBS=`$MPICC --showme:link`
          loom_mpi_how="$MPICC --showme"
        ], [$MPICC -compile_info >/dev/null 2>&1], [
          dnl MPICH prints the whole compiler line; keep its flags.
          MPI_CFLAGS=`$MPICC -compile_info | tr ' ' '\n' | grep '^-I' | tr '\n' ' '`
          MPI_LIBS=`$MPICC -link_info | tr ' ' '\n' | grep -E '^-(L|l|Wl)' | tr '\n' ' '`
          loom_mpi_how="$MPICC -link_info"
        ])
      ])
    ])
  ], [loom_mpi_how="MPI_CFLAGS/MPI_LIBS"])
  AS_IF([test -n "$MPI_LIBS"], [
    loom_save_CPPFLAGS="$CPPFLAGS"; loom_save_LIBS="$LIBS"
    CPPFLAGS="$CPPFLAGS $MPI_CFLAGS"; LIBS="$MPI_LIBS $LIBS"
    AC_MSG_CHECKING([whether MPI programs link])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]],
        [[int p; return MPI_Init_thread(0, 0, MPI_THREAD_SERIALIZED, &p);]])],
      [have_mpi=yes; loom_mpi_summary="yes ($loom_mpi_how)"],
      [loom_mpi_summary="no (MPI programs do not link)"])
    AC_MSG_RESULT([$have_mpi])
    CPPFLAGS="$loom_save_CPPFLAGS"; LIBS="$loom_save_LIBS"
  ])
  AS_IF([test "x$have_mpi" != xyes && test "x$with_mpi" = xyes],
    [AC_MSG_ERROR([--with-mpi was given but MPI cannot be used: $loom_mpi_summary])])
])
AC_PATH_PROG([MPIRUN], [mpirun], [])
AC_SUBST([MPI_CFLAGS])
AC_SUBST([MPI_LIBS])
AM_CONDITIONAL([HAVE_MPI], [test "x$have_mpi" = xyes])
])
