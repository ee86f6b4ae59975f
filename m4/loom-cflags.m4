dnl SPDX-License-Identifier: MIT
dnl loom-cflags.m4 - probing the compiler for optional flags, so that
dnl builds with GCC and with Clang each get the flags they understand.

dnl LOOM_CHECK_CFLAGS(VARIABLE, FLAGS)
dnl Appends to VARIABLE each of FLAGS that the C compiler accepts.  Each
dnl flag is tried alone with -Werror, since Clang only warns about many
dnl optimization flags it does not know.
AC_DEFUN([LOOM_CHECK_CFLAGS], [
	for loom_flag in $2; do
		AS_VAR_PUSHDEF([loom_cache], [loom_cv_cflag_$loom_flag])
		AC_CACHE_CHECK([whether $CC accepts $loom_flag], [loom_cache], [
			loom_save_cflags=$CFLAGS
			CFLAGS="$CFLAGS -Werror $loom_flag"
			AC_COMPILE_IFELSE([AC_LANG_PROGRAM([], [])],
					  [AS_VAR_SET([loom_cache], [yes])],
					  [AS_VAR_SET([loom_cache], [no])])
			CFLAGS=$loom_save_cflags
		])
		AS_VAR_IF([loom_cache], [yes],
			  [$1="${$1:+$$1 }$loom_flag"])
		AS_VAR_POPDEF([loom_cache])
	done
	AC_SUBST([$1])
])
