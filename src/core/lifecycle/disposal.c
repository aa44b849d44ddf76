/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DisposalFailure and its fold (checklist 4.16, 4.17; DESIGN 9.18): a closed
 * code callers branch on and a detail for logs only. The fold keeps the most
 * actionable code (refused > unreachable > timeout > unlisted > unknown, the
 * table in vocab.c) and every detail.
 */
#include "core/core.h"

int msb_disposal_failure_new(msb_disposal_code code, const char *detail, msb_disposal_failure **out,
			     msb_error **err)
{
	if (!msb_disposal_code_name(code))
		return msb_error_set(err, MSB_E_VALUE,
				     "%d is not a disposal code: expected one of unreachable, "
				     "timeout, refused, unlisted, unknown",
				     (int)code);
	if (!out)
		return msb_error_set(err, MSB_E_VALUE, "disposal failure: no place for the result");
	msb_disposal_failure *f = calloc(1, sizeof(*f));
	if (!f)
		return msb__error_nomem(err);
	f->code = code;
	if (detail && !(f->detail = strdup(detail))) {
		free(f);
		return msb__error_nomem(err);
	}
	*out = f;
	return 0;
}

void msb_disposal_failure_free(msb_disposal_failure *f)
{
	if (!f)
		return;
	free(f->detail);
	free(f);
}

int msb_fold_disposal_failures(const msb_disposal_failure *const *failures, size_t n,
			       msb_disposal_failure **out, msb_error **err)
{
	if (!out || (n > 0 && !failures))
		return msb_error_set(err, MSB_E_VALUE, "fold_disposal_failures: missing argument");

	/* NULL entries are backends that reported nothing; a fold of nothing
	 * is nothing (*out NULL). On a tie the earlier failure's code wins. */
	const msb_disposal_failure *winner = NULL;
	msb_buf details = MSB_BUF_INIT;
	bool any_detail = false;
	for (size_t i = 0; i < n; i++) {
		const msb_disposal_failure *f = failures[i];
		if (!f)
			continue;
		if (msb_disposal_code_precedence(f->code) < 0) {
			msb__buf_free(&details);
			return msb_error_set(err, MSB_E_VALUE,
					     "fold_disposal_failures: %d is not a disposal code",
					     (int)f->code);
		}
		if (!winner || msb_disposal_code_precedence(f->code) >
				       msb_disposal_code_precedence(winner->code))
			winner = f;
		if (f->detail) {
			if (any_detail)
				msb__buf_puts(&details, "; ");
			msb__buf_puts(&details, f->detail);
			any_detail = true;
		}
	}
	if (!winner) {
		msb__buf_free(&details);
		*out = NULL;
		return 0;
	}

	_cleanup_free_ char *joined = NULL;
	if (any_detail && !(joined = msb__buf_steal_str(&details)))
		return msb__error_nomem(err);
	msb__buf_free(&details);
	return msb_disposal_failure_new(winner->code, joined, out, err);
}
