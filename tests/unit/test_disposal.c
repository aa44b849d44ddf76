/* SPDX-License-Identifier: Apache-2.0 */
/* DisposalFailure and fold_disposal_failures (checklist 1.20, 4.16, 4.17; DESIGN 9.18). */
#include <criterion/criterion.h>
#include <string.h>

#include <msb/backend.h>

static msb_disposal_failure *failure(msb_disposal_code code, const char *detail)
{
	msb_disposal_failure *f = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_disposal_failure_new(code, detail, &f, &err), 0, "%s",
		     msb_error_message(err));
	return f;
}

/* 1.20: the closed set constructs; anything else is refused. */
Test(disposal, five_codes_construct_others_refused_1_20)
{
	const msb_disposal_code codes[] = {MSB_DISPOSAL_UNREACHABLE, MSB_DISPOSAL_TIMEOUT,
					   MSB_DISPOSAL_REFUSED, MSB_DISPOSAL_UNLISTED,
					   MSB_DISPOSAL_UNKNOWN};
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		msb_disposal_failure *f = failure(codes[i], "why");
		cr_assert_eq(f->code, codes[i]);
		cr_assert_str_eq(f->detail, "why");
		msb_disposal_failure_free(f);
	}

	msb_disposal_failure *f = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_disposal_failure_new((msb_disposal_code)99, "x", &f, &err), MSB_E_VALUE);
	cr_assert_null(f);
	cr_assert(strstr(msb_error_message(err), "not a disposal code"));
	msb_error_free(err);
	msb_disposal_failure_free(NULL);
}

/* 4.16: the detail is copied, and may be absent. */
Test(disposal, detail_copied_or_absent_4_16)
{
	char buf[] = "kept";
	msb_disposal_failure *f = failure(MSB_DISPOSAL_REFUSED, buf);
	buf[0] = 'X';
	cr_assert_str_eq(f->detail, "kept");
	msb_disposal_failure_free(f);

	f = failure(MSB_DISPOSAL_UNKNOWN, NULL);
	cr_assert_null(f->detail);
	msb_disposal_failure_free(f);
}

/* 4.17: one failure, the precedence winner's code, every detail kept. */
Test(disposal, fold_keeps_winner_and_every_detail_4_17)
{
	msb_disposal_failure *a = failure(MSB_DISPOSAL_UNREACHABLE, "a");
	msb_disposal_failure *b = failure(MSB_DISPOSAL_REFUSED, "b");
	const msb_disposal_failure *list[] = {a, b};
	msb_disposal_failure *out = NULL;
	cr_assert_eq(msb_fold_disposal_failures(list, 2, &out, NULL), 0);
	cr_assert_eq(out->code, MSB_DISPOSAL_REFUSED);
	cr_assert(strstr(out->detail, "a"));
	cr_assert(strstr(out->detail, "b"));
	cr_assert_str_eq(out->detail, "a; b");
	msb_disposal_failure_free(out);
	msb_disposal_failure_free(a);
	msb_disposal_failure_free(b);
}

/* 23.18 / DESIGN 9.18: refused > unreachable > timeout > unlisted > unknown,
 * checked over every ordered pair. */
Test(disposal, fold_precedence_order_9_18)
{
	const msb_disposal_code order[] = {MSB_DISPOSAL_REFUSED, MSB_DISPOSAL_UNREACHABLE,
					   MSB_DISPOSAL_TIMEOUT, MSB_DISPOSAL_UNLISTED,
					   MSB_DISPOSAL_UNKNOWN};
	for (size_t i = 0; i < 5; i++) {
		for (size_t j = 0; j < 5; j++) {
			msb_disposal_failure *x = failure(order[i], "x");
			msb_disposal_failure *y = failure(order[j], "y");
			const msb_disposal_failure *list[] = {x, y};
			msb_disposal_failure *out = NULL;
			cr_assert_eq(msb_fold_disposal_failures(list, 2, &out, NULL), 0);
			cr_assert_eq(out->code, order[i < j ? i : j], "fold(%s, %s)",
				     msb_disposal_code_name(order[i]),
				     msb_disposal_code_name(order[j]));
			msb_disposal_failure_free(out);
			msb_disposal_failure_free(x);
			msb_disposal_failure_free(y);
		}
	}
}

/* Backends that reported nothing are NULL entries: skipped; nothing failed
 * folds to nothing. A failure without detail contributes no text. */
Test(disposal, fold_skips_nothing_reported_4_17)
{
	msb_disposal_failure *t = failure(MSB_DISPOSAL_TIMEOUT, NULL);
	msb_disposal_failure *u = failure(MSB_DISPOSAL_UNLISTED, "gone from listing");
	const msb_disposal_failure *list[] = {NULL, t, NULL, u};
	msb_disposal_failure *out = NULL;
	cr_assert_eq(msb_fold_disposal_failures(list, 4, &out, NULL), 0);
	cr_assert_eq(out->code, MSB_DISPOSAL_TIMEOUT);
	cr_assert_str_eq(out->detail, "gone from listing");
	msb_disposal_failure_free(out);

	const msb_disposal_failure *none[] = {NULL, NULL};
	out = (msb_disposal_failure *)1;
	cr_assert_eq(msb_fold_disposal_failures(none, 2, &out, NULL), 0);
	cr_assert_null(out);
	out = (msb_disposal_failure *)1;
	cr_assert_eq(msb_fold_disposal_failures(NULL, 0, &out, NULL), 0);
	cr_assert_null(out);

	const msb_disposal_failure *only_t[] = {t};
	cr_assert_eq(msb_fold_disposal_failures(only_t, 1, &out, NULL), 0);
	cr_assert_null(out->detail);
	msb_disposal_failure_free(out);
	msb_disposal_failure_free(t);
	msb_disposal_failure_free(u);
}

Test(disposal, fold_refuses_bad_arguments)
{
	msb_error *err = NULL;
	cr_assert_eq(msb_fold_disposal_failures(NULL, 2, NULL, &err), MSB_E_VALUE);
	msb_error_free(err);

	msb_disposal_failure bogus = {.code = (msb_disposal_code)42, .detail = NULL};
	const msb_disposal_failure *list[] = {&bogus};
	msb_disposal_failure *out = NULL;
	err = NULL;
	cr_assert_eq(msb_fold_disposal_failures(list, 1, &out, &err), MSB_E_VALUE);
	cr_assert_null(out);
	msb_error_free(err);
}
