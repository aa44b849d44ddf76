/* SPDX-License-Identifier: Apache-2.0 */
#ifndef MSB_TESTS_UNIT_SPY_SANDBOX_H
#define MSB_TESTS_UNIT_SPY_SANDBOX_H

#include <msb/sandbox.h>

/*
 * A sandbox that forwards the file plane to an inner one (the fake), counts
 * the calls, and misbehaves on request: a stat or read of one path fails
 * with a code, a stat reports no size, or a file grows right after its stat.
 * exec/exec_bounded go to `exec` when set (a scripted guest shell), else to
 * the inner sandbox. The spy is owned by the test; the handle borrows it.
 */
struct spy {
	msb_sandbox *inner;
	int stats, reads;
	const char *stat_fail_path;
	int stat_fail_code;
	const char *read_fail_path;
	int read_fail_code;
	const char *unknown_size_path;
	const char *grow_rel;  /* after a stat of this path ... */
	const char *grow_path; /* ... this one (same working directory) grows */
	int (*exec)(struct spy *s, const msb_exec_request *req, bool bounded, msb_exec_result *out,
		    msb_error **err);
	void *ud;
};

int spy_handle(struct spy *s, msb_sandbox **out);

#endif
