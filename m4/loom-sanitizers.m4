dnl SPDX-License-Identifier: MIT
dnl loom-sanitizers.m4 - --enable-sanitizers=LIST: everything built with
dnl the compiler's sanitizers (address,undefined or thread), for testing.

dnl LOOM_CHECK_SANITIZERS
dnl Adds -fsanitize=LIST (and what makes a report fatal and readable) to
dnl CFLAGS, CXXFLAGS and LDFLAGS, and sets NO_UNDEFINED, the flag that
dnl makes libloom and the plugins list every library they need.  Shared
dnl objects reach the sanitizer's runtime in one of three ways, tried in
dnl turn: as a shared library the compiler links by default (GCC); as the
dnl shared runtime asked for with -shared-libsan, found through an rpath
dnl (Clang's ASan and UBSan); or, where the runtime can only live in the
dnl programs (Clang's TSan, whose shared runtime does not run), from the
dnl program that loads them, which leaves their runtime symbols undefined
dnl at link time, so NO_UNDEFINED is empty then.
AC_DEFUN([LOOM_CHECK_SANITIZERS], [
AC_ARG_ENABLE([sanitizers],
  [AS_HELP_STRING([--enable-sanitizers=LIST],
    [build with the compiler's sanitizers: address,undefined or thread (for testing, not for packages)])],
  [], [enable_sanitizers=no])
NO_UNDEFINED=-Wl,--no-undefined
loom_sanitizers_summary=no
AS_CASE([$enable_sanitizers],
  [no], [],
  [yes|""], [AC_MSG_ERROR([--enable-sanitizers needs a list: address,undefined or thread])],
  [*thread*address*|*address*thread*],
    [AC_MSG_ERROR([--enable-sanitizers: thread and address do not combine])],
  [
	loom_san="-fsanitize=$enable_sanitizers -fno-omit-frame-pointer -fno-sanitize-recover=all"
	AC_MSG_CHECKING([how shared objects link with -fsanitize=$enable_sanitizers])
	loom_save_cflags=$CFLAGS
	loom_save_ldflags=$LDFLAGS
	loom_save_cc=$CC
	CFLAGS="$CFLAGS $loom_san -fPIC"
	LDFLAGS="$LDFLAGS -shared -Wl,--no-undefined"
	loom_san_link=
	AC_LINK_IFELSE([AC_LANG_SOURCE([[int f(int *p) { return *p; }]])],
	  [loom_san_link=plain])
	loom_san_thread=no
	AS_CASE([$enable_sanitizers], [*thread*], [loom_san_thread=yes])
	AS_IF([test -z "$loom_san_link" && test $loom_san_thread = no], [
		CC="$CC -shared-libsan"
		AC_LINK_IFELSE([AC_LANG_SOURCE([[int f(int *p) { return *p; }]])],
		  [loom_san_link=shared-libsan])
	])
	CC=$loom_save_cc
	CFLAGS=$loom_save_cflags
	LDFLAGS=$loom_save_ldflags
	AS_CASE([$loom_san_link],
	  [plain], [AC_MSG_RESULT([with the shared runtime])],
	  [shared-libsan], [
		dnl libtool drops -shared-libsan from a link line, so it
		dnl goes with the compiler; the runtime's directory is
		dnl recorded so that the tests find it.
		CC="$CC -shared-libsan"
		CXX="$CXX -shared-libsan"
		loom_san_rt=`$CC -print-runtime-dir 2>/dev/null`
		AS_IF([test -d "$loom_san_rt"],
		  [LDFLAGS="$LDFLAGS -Wl,-rpath,$loom_san_rt"])
		AC_MSG_RESULT([with -shared-libsan])],
	  [
		NO_UNDEFINED=
		AC_MSG_RESULT([without --no-undefined (the runtime is in the programs)])])
	CFLAGS="$CFLAGS $loom_san -g"
	CXXFLAGS="$CXXFLAGS $loom_san -g"
	LDFLAGS="$LDFLAGS $loom_san"
	loom_sanitizers_summary=$enable_sanitizers
  ])
AC_SUBST([NO_UNDEFINED])
])
