dnl SPDX-License-Identifier: MIT
dnl loom-cuda.m4 - finds nvcc, the CUDA runtime, cuBLAS and NCCL.
dnl Options default to "check": a missing toolkit is a summary line, an
dnl error only when the user asked for it.
dnl
dnl Sets NVCC, CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS, NCCL_CPPFLAGS,
dnl NCCL_LDFLAGS, NCCL_LIBS, CUDA_ARCHS, CUDA_ARCH_FLAGS and the
dnl conditionals HAVE_CUDA, HAVE_NCCL.

AC_DEFUN([LOOM_CHECK_CUDA], [
AC_ARG_WITH([cuda],
  [AS_HELP_STRING([--with-cuda@<:@=DIR@:>@],
    [build the CUDA plugin (default: check PATH and /usr/local/cuda)])],
  [], [with_cuda=check])
AC_ARG_WITH([nccl],
  [AS_HELP_STRING([--with-nccl@<:@=DIR@:>@],
    [use NCCL for the CUDA allreduce (default: check)])],
  [], [with_nccl=check])
AC_ARG_WITH([cuda-archs],
  [AS_HELP_STRING([--with-cuda-archs=LIST],
    [SM numbers to build, e.g. "80 90"; PTX of the last is embedded
     (default: those of this machine's GPUs, else "75 80 86 89 90")])],
  [CUDA_ARCHS="$withval"; loom_cuda_archs_given=yes],
  [CUDA_ARCHS="75 80 86 89 90"; loom_cuda_archs_given=no])
loom_cuda_archs_why="given"
CUDA_ARCHS=`echo "$CUDA_ARCHS" | tr ',;' '  '`

loom_cuda_summary="no (disabled)"
loom_nccl_summary="no"
have_cuda=no
have_nccl=no
AS_IF([test "x$with_cuda" != xno], [
  loom_cuda_dirs=""
  AS_CASE([$with_cuda],
    [yes|check], [loom_cuda_dirs="/usr/local/cuda /opt/cuda"],
    [loom_cuda_dirs="$with_cuda"])
  NVCC=""
  AS_IF([test "x$with_cuda" = xyes || test "x$with_cuda" = xcheck],
    [AC_PATH_PROG([NVCC], [nvcc], [])])
  CUDA_HOME=""
  AS_IF([test -n "$NVCC"],
    [CUDA_HOME=`dirname "$NVCC"`; CUDA_HOME=`dirname "$CUDA_HOME"`],
    [for d in $loom_cuda_dirs; do
       AS_IF([test -x "$d/bin/nvcc"], [NVCC="$d/bin/nvcc"; CUDA_HOME="$d"; break])
     done])
  AS_IF([test -z "$NVCC"], [loom_cuda_summary="no (nvcc not found)"], [
    CUDA_CPPFLAGS="-isystem $CUDA_HOME/include"
    loom_cuda_libdir="$CUDA_HOME/lib64"
    AS_IF([test -d "$loom_cuda_libdir"], [], [loom_cuda_libdir="$CUDA_HOME/lib"])
    CUDA_LDFLAGS="-L$loom_cuda_libdir"
    AS_IF([test "x$enable_rpath" != xno],
      [CUDA_LDFLAGS="$CUDA_LDFLAGS -Wl,-rpath,$loom_cuda_libdir"])
    loom_save_CPPFLAGS="$CPPFLAGS"; loom_save_LDFLAGS="$LDFLAGS"; loom_save_LIBS="$LIBS"
    CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"; LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
    AC_CHECK_HEADER([cuda_runtime.h], [
      AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [
        AC_CHECK_LIB([cublas], [cublasCreate_v2], [
          have_cuda=yes
          CUDA_LIBS="-lcublas -lcudart"
          loom_cuda_summary="yes ($NVCC)"
        ], [loom_cuda_summary="no (cuBLAS not found)"], [-lcudart])
      ], [loom_cuda_summary="no (libcudart not found)"])
    ], [loom_cuda_summary="no (cuda_runtime.h not found)"])
    dnl NCCL, in the toolkit or its own directory.
    AS_IF([test "x$have_cuda" = xyes && test "x$with_nccl" != xno], [
      AS_CASE([$with_nccl],
        [yes|check], [],
        [NCCL_CPPFLAGS="-I$with_nccl/include"
         NCCL_LDFLAGS="-L$with_nccl/lib"
         AS_IF([test "x$enable_rpath" != xno],
           [NCCL_LDFLAGS="$NCCL_LDFLAGS -Wl,-rpath,$with_nccl/lib"])])
      CPPFLAGS="$CPPFLAGS $NCCL_CPPFLAGS"; LDFLAGS="$LDFLAGS $NCCL_LDFLAGS"
      AC_CHECK_HEADER([nccl.h], [
        AC_CHECK_LIB([nccl], [ncclCommInitRank], [
          have_nccl=yes; NCCL_LIBS="-lnccl"; loom_nccl_summary="yes"
        ], [loom_nccl_summary="no (libnccl not found)"], [-lcudart])
      ], [loom_nccl_summary="no (nccl.h not found)"])
    ], [AS_IF([test "x$with_nccl" = xno], [loom_nccl_summary="no (disabled)"])])
    CPPFLAGS="$loom_save_CPPFLAGS"; LDFLAGS="$loom_save_LDFLAGS"; LIBS="$loom_save_LIBS"
  ])
  AS_IF([test "x$have_cuda" != xyes && test "x$with_cuda" != xcheck],
    [AC_MSG_ERROR([--with-cuda was given but CUDA cannot be used: $loom_cuda_summary])])
  AS_IF([test "x$have_nccl" != xyes && test "x$have_cuda" = xyes && test "x$with_nccl" != xcheck && test "x$with_nccl" != xno],
    [AC_MSG_ERROR([--with-nccl was given but NCCL cannot be used: $loom_nccl_summary])])
])

dnl Keep the archs this nvcc knows: a default one it does not is dropped,
dnl one the user named is an error.
CUDA_ARCHS=`echo "$CUDA_ARCHS" | sed 's/sm_//g'`
AS_IF([test "x$have_cuda" = xyes], [
  loom_cuda_known=`$NVCC --list-gpu-arch 2>/dev/null | tr '\n' ' '`
  AS_IF([test "x$loom_cuda_archs_given" = xno], [LOOM_CUDA_HOST_ARCHS])
  AS_IF([test -n "$loom_cuda_known"], [
    loom_cuda_ok=""
    loom_cuda_bad=""
    for a in $CUDA_ARCHS; do
      AS_CASE([" $loom_cuda_known "],
        [*" compute_$a "*], [loom_cuda_ok="$loom_cuda_ok $a"],
        [loom_cuda_bad="$loom_cuda_bad $a"])
    done
    AS_IF([test -n "$loom_cuda_bad" && test "x$loom_cuda_archs_given" = xyes],
      [AC_MSG_ERROR([$NVCC cannot build for:$loom_cuda_bad])])
    CUDA_ARCHS=`echo $loom_cuda_ok`
    AS_IF([test -z "$CUDA_ARCHS"],
      [have_cuda=no
       loom_cuda_summary="no ($NVCC builds none of:$loom_cuda_bad)"])
  ])
])
CUDA_ARCH_FLAGS=""
loom_last_arch=""
for a in $CUDA_ARCHS; do
  CUDA_ARCH_FLAGS="$CUDA_ARCH_FLAGS -gencode arch=compute_$a,code=sm_$a"
  loom_last_arch="$a"
done
AS_IF([test -n "$loom_last_arch"],
  [CUDA_ARCH_FLAGS="$CUDA_ARCH_FLAGS -gencode arch=compute_$loom_last_arch,code=compute_$loom_last_arch"])

AC_SUBST([NVCC])
AC_SUBST([CUDA_CPPFLAGS])
AC_SUBST([CUDA_LDFLAGS])
AC_SUBST([CUDA_LIBS])
AC_SUBST([NCCL_CPPFLAGS])
AC_SUBST([NCCL_LDFLAGS])
AC_SUBST([NCCL_LIBS])
AC_SUBST([CUDA_ARCHS])
AC_SUBST([CUDA_ARCH_FLAGS])
AM_CONDITIONAL([HAVE_CUDA], [test "x$have_cuda" = xyes])
AM_CONDITIONAL([HAVE_NCCL], [test "x$have_nccl" = xyes])
])

dnl LOOM_CUDA_HOST_ARCHS - with no list given, builds for the GPUs of this
dnl machine alone (nvidia-smi names their compute capability) when nvcc
dnl builds for them all: one architecture compiles in a fraction of the
dnl time of the default list, which stays for a machine without a GPU.
AC_DEFUN([LOOM_CUDA_HOST_ARCHS], [
  AC_MSG_CHECKING([for the NVIDIA GPUs of this machine])
  loom_cuda_host=`(nvidia-smi --query-gpu=compute_cap --format=csv,noheader) 2>/dev/null | tr -d '. \r' | sort -u`
  loom_cuda_host=`echo $loom_cuda_host`
  loom_cuda_unbuilt=""
  for a in $loom_cuda_host; do
    AS_CASE([$a], [*[[!0-9]]*], [loom_cuda_unbuilt="$loom_cuda_unbuilt $a"])
    AS_IF([test -n "$loom_cuda_known"],
      [AS_CASE([" $loom_cuda_known "], [*" compute_$a "*], [],
        [loom_cuda_unbuilt="$loom_cuda_unbuilt $a"])])
  done
  AS_IF([test -z "$loom_cuda_host"],
    [loom_cuda_archs_why="the default list: no GPU here"
     AC_MSG_RESULT([none])],
    [test -n "$loom_cuda_unbuilt"],
    [loom_cuda_archs_why="the default list: $NVCC does not build for this machine's$loom_cuda_unbuilt"
     AC_MSG_RESULT([$loom_cuda_host, not all of which $NVCC builds for])],
    [CUDA_ARCHS="$loom_cuda_host"
     loom_cuda_archs_why="this machine's GPUs; --with-cuda-archs for others"
     AC_MSG_RESULT([$loom_cuda_host])])
])
