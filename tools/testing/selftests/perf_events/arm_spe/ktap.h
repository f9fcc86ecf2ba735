/* SPDX-License-Identifier: GPL-2.0 */
/*
 * KTAP output for a build outside a kernel tree: the few kselftest
 * helpers the suite uses, under their names. Inside a tree the Makefile
 * defines SPE_KSELFTEST and the suite includes the tree's kselftest.h
 * instead.
 */
#ifndef SPE_KTAP_H
#define SPE_KTAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define KSFT_PASS 0
#define KSFT_FAIL 1
#define KSFT_SKIP 4

static unsigned int ktap_n, ktap_pass, ktap_fail, ktap_skip;

static inline void ksft_print_header(void)
{
	printf("TAP version 13\n");
}

static inline void ksft_set_plan(unsigned int plan)
{
	printf("1..%u\n", plan);
}

static inline void ktap_result(const char *res, const char *dir,
			       const char *fmt, va_list ap)
{
	printf("%s %u %s", res, ++ktap_n, dir);
	vprintf(fmt, ap);
	fflush(stdout);
}

static inline void ksft_print_msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("# ");
	vprintf(fmt, ap);
	va_end(ap);
}

static inline void ksft_test_result_pass(const char *fmt, ...)
{
	va_list ap;

	ktap_pass++;
	va_start(ap, fmt);
	ktap_result("ok", "", fmt, ap);
	va_end(ap);
}

static inline void ksft_test_result_fail(const char *fmt, ...)
{
	va_list ap;

	ktap_fail++;
	va_start(ap, fmt);
	ktap_result("not ok", "", fmt, ap);
	va_end(ap);
}

static inline void ksft_test_result_skip(const char *fmt, ...)
{
	va_list ap;

	ktap_skip++;
	va_start(ap, fmt);
	ktap_result("ok", "# SKIP ", fmt, ap);
	va_end(ap);
}

static inline void ksft_exit_skip(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("1..0 # SKIP ");
	vprintf(fmt, ap);
	va_end(ap);
	exit(KSFT_SKIP);
}

static inline void ksft_finished(void)
{
	printf("# Totals: pass:%u fail:%u xfail:0 xpass:0 skip:%u error:0\n",
	       ktap_pass, ktap_fail, ktap_skip);
	exit(ktap_fail ? KSFT_FAIL : KSFT_PASS);
}

#endif
