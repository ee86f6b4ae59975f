dnl SPDX-License-Identifier: MIT
dnl loom-hip.m4 - finds hipcc, the HIP runtime, and optionally hipBLAS
dnl (which runs on rocBLAS) and RCCL.  Options default to "check".
dnl
dnl Sets HIPCC, HIP_CPPFLAGS, HIP_LDFLAGS, HIP_LIBS, HIP_ARCHS,
dnl HIP_ARCH_FLAGS, ROCBLAS_LIBS, RCCL_LIBS and the conditionals HAVE_HIP,
dnl HAVE_ROCBLAS, HAVE_RCCL.

AC_DEFUN([LOOM_CHECK_HIP], [
AC_ARG_WITH([hip],
  [AS_HELP_STRING([--with-hip@<:@=DIR@:>@],
    [build the HIP plugin (default: check PATH, /opt/rocm and /usr)])],
  [], [with_hip=check])
AC_ARG_WITH([hip-archs],
  [AS_HELP_STRING([--with-hip-archs=LIST],
    [offload archs, e.g. "gfx90a gfx1100" (default: those of this machine's GPUs, else "gfx90a gfx942 gfx1030 gfx1100")])],
  [HIP_ARCHS="$withval"; loom_hip_archs_given=yes],
  [HIP_ARCHS="gfx90a gfx942 gfx1030 gfx1100"; loom_hip_archs_given=no])
loom_hip_default="$HIP_ARCHS"
loom_hip_archs_why="given"
AC_ARG_WITH([rocblas],
  [AS_HELP_STRING([--with-rocblas], [use hipBLAS (on rocBLAS) for GEMM (default: check)])],
  [], [with_rocblas=check])
AC_ARG_WITH([rccl],
  [AS_HELP_STRING([--with-rccl], [use RCCL for the HIP allreduce (default: check)])],
  [], [with_rccl=check])
HIP_ARCHS=`echo "$HIP_ARCHS" | tr ',;' '  '`
dnl hipcc without --offload-arch probes for a GPU (and fails without one).
AS_IF([test -z "`echo $HIP_ARCHS`"],
  [AC_MSG_WARN([--with-hip-archs is empty; using the default list])
   HIP_ARCHS="gfx90a gfx942 gfx1030 gfx1100"; loom_hip_default="$HIP_ARCHS"])

have_hip=no
have_rocblas=no
have_rccl=no
loom_hip_summary="no (disabled)"
loom_rocblas_summary="no"
loom_rccl_summary="no"
AS_IF([test "x$with_hip" != xno], [
  HIPCC=""
  AS_CASE([$with_hip],
    [yes|check], [AC_PATH_PROG([HIPCC], [hipcc], [], [$PATH:/opt/rocm/bin])],
    [AS_IF([test -x "$with_hip/bin/hipcc"], [HIPCC="$with_hip/bin/hipcc"])])
  AS_IF([test -z "$HIPCC"], [loom_hip_summary="no (hipcc not found)"], [
    HIP_HOME=`dirname "$HIPCC"`; HIP_HOME=`dirname "$HIP_HOME"`
    AS_IF([test "x$HIP_HOME" != x/usr], [
      HIP_CPPFLAGS="-isystem $HIP_HOME/include"
      HIP_LDFLAGS="-L$HIP_HOME/lib"
      AS_IF([test "x$enable_rpath" != xno],
        [HIP_LDFLAGS="$HIP_LDFLAGS -Wl,-rpath,$HIP_HOME/lib"])])
    HIP_CPPFLAGS="$HIP_CPPFLAGS -D__HIP_PLATFORM_AMD__"
    loom_save_CPPFLAGS="$CPPFLAGS"; loom_save_LDFLAGS="$LDFLAGS"; loom_save_LIBS="$LIBS"
    CPPFLAGS="$CPPFLAGS $HIP_CPPFLAGS"; LDFLAGS="$LDFLAGS $HIP_LDFLAGS"
    AC_CHECK_LIB([amdhip64], [hipGetDeviceCount], [
      have_hip=yes; HIP_LIBS="-lamdhip64"; loom_hip_summary="yes ($HIPCC)"
      dnl The plugin calls BLAS through hipBLAS (which runs on rocBLAS).
      AS_IF([test "x$with_rocblas" != xno], [
        AC_CHECK_HEADER([hipblas/hipblas.h], [
          AC_CHECK_LIB([hipblas], [hipblasGemmStridedBatchedEx],
            [have_rocblas=yes; ROCBLAS_LIBS="-lhipblas"
             loom_rocblas_summary="yes (hipBLAS)"],
            [loom_rocblas_summary="no (libhipblas not found; own GEMM kernel)"],
            [-lamdhip64])
        ], [loom_rocblas_summary="no (hipblas/hipblas.h not found; own GEMM kernel)"])])
      AS_IF([test "x$with_rccl" != xno], [
        AC_CHECK_HEADER([rccl/rccl.h], [
          AC_CHECK_LIB([rccl], [ncclCommInitAll],
            [have_rccl=yes; RCCL_LIBS="-lrccl"; loom_rccl_summary="yes"],
            [loom_rccl_summary="no (librccl not found)"], [-lamdhip64])
        ], [loom_rccl_summary="no (rccl/rccl.h not found)"])])
    ], [loom_hip_summary="no (libamdhip64 not found)"])
    CPPFLAGS="$loom_save_CPPFLAGS"; LDFLAGS="$loom_save_LDFLAGS"; LIBS="$loom_save_LIBS"
    AS_IF([test "x$have_hip" = xyes], [
      loom_hip_host=""
      AS_IF([test "x$loom_hip_archs_given" = xno], [LOOM_HIP_HOST_ARCHS])
      LOOM_HIP_PROBE_ARCHS
      dnl This hipcc builds for none of the GPUs here: the default list.
      AS_IF([test -z "$HIP_ARCHS" && test -n "$loom_hip_host"],
        [HIP_ARCHS="$loom_hip_default"; have_hip=yes
         loom_hip_summary="yes ($HIPCC)"
         loom_hip_archs_why="the default list: $HIPCC builds for no GPU here"
         LOOM_HIP_PROBE_ARCHS])])
  ])
  AS_IF([test "x$have_hip" != xyes && test "x$with_hip" != xcheck],
    [AC_MSG_ERROR([--with-hip was given but HIP cannot be used: $loom_hip_summary])])
  AS_IF([test "x$with_rocblas" = xyes && test "x$have_rocblas" != xyes],
    [AC_MSG_ERROR([--with-rocblas was given but hipBLAS/rocBLAS cannot be used: $loom_rocblas_summary])])
  AS_IF([test "x$with_rccl" = xyes && test "x$have_rccl" != xyes],
    [AC_MSG_ERROR([--with-rccl was given but RCCL cannot be used: $loom_rccl_summary])])
])
HIP_ARCH_FLAGS=""
for a in $HIP_ARCHS; do HIP_ARCH_FLAGS="$HIP_ARCH_FLAGS --offload-arch=$a"; done

AC_SUBST([HIPCC])
AC_SUBST([HIP_CPPFLAGS])
AC_SUBST([HIP_LDFLAGS])
AC_SUBST([HIP_LIBS])
AC_SUBST([HIP_ARCHS])
AC_SUBST([HIP_ARCH_FLAGS])
AC_SUBST([ROCBLAS_LIBS])
AC_SUBST([RCCL_LIBS])
AM_CONDITIONAL([HAVE_HIP], [test "x$have_hip" = xyes])
AM_CONDITIONAL([HAVE_ROCBLAS], [test "x$have_rocblas" = xyes])
AM_CONDITIONAL([HAVE_RCCL], [test "x$have_rccl" = xyes])
])

dnl LOOM_HIP_PROBE_ARCHS - keeps the offload archs this hipcc can build.
dnl An older ROCm rejects newer targets (ROCm 5.2: gfx942, gfx1100); a
dnl default target it rejects is dropped, one the user named is an error.
AC_DEFUN([LOOM_HIP_PROBE_ARCHS], [
  AC_MSG_CHECKING([which offload archs $HIPCC builds])
  printf '#include <hip/hip_runtime.h>\n__global__ void k(int *p) { *p = 1; }\n' > conftest.hip
  loom_hip_ok=""
  loom_hip_bad=""
  for a in $HIP_ARCHS; do
    AS_IF([$HIPCC -x hip --offload-arch=$a -c conftest.hip -o conftest.$OBJEXT >&AS_MESSAGE_LOG_FD 2>&1],
      [loom_hip_ok="$loom_hip_ok $a"], [loom_hip_bad="$loom_hip_bad $a"])
  done
  rm -f conftest.hip conftest.$OBJEXT
  loom_hip_ok=`echo $loom_hip_ok`
  AC_MSG_RESULT([${loom_hip_ok:-none}${loom_hip_bad:+ (not:$loom_hip_bad)}])
  AS_IF([test -n "$loom_hip_bad" && test "x$loom_hip_archs_given" = xyes],
    [AC_MSG_ERROR([$HIPCC cannot build for:$loom_hip_bad])])
  HIP_ARCHS=`echo $loom_hip_ok`
  AS_IF([test -z "$HIP_ARCHS"],
    [have_hip=no
     loom_hip_summary="no ($HIPCC builds none of:$loom_hip_bad)"])
])

dnl LOOM_HIP_HOST_ARCHS - with no list given, builds for the GPUs of this
dnl machine alone, as amdgpu-arch (else rocminfo) names them; the default
dnl list stays for a machine without a GPU.
AC_DEFUN([LOOM_HIP_HOST_ARCHS], [
  AC_MSG_CHECKING([for the AMD GPUs of this machine])
  loom_hip_path="$PATH:$HIP_HOME/bin:$HIP_HOME/llvm/bin:/opt/rocm/bin:/opt/rocm/llvm/bin"
  loom_hip_host=`(PATH="$loom_hip_path"; amdgpu-arch || rocminfo | sed -n 's/^ *Name: *\(gfx[[0-9a-f]]*\) *$/\1/p') 2>/dev/null | grep '^gfx[[0-9a-f]]*$' | sort -u`
  loom_hip_host=`echo $loom_hip_host`
  AS_IF([test -n "$loom_hip_host"],
    [HIP_ARCHS="$loom_hip_host"
     loom_hip_archs_why="this machine's GPUs; --with-hip-archs for others"
     AC_MSG_RESULT([$loom_hip_host])],
    [loom_hip_archs_why="the default list: no GPU here"
     AC_MSG_RESULT([none])])
])
