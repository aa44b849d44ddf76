/* SPDX-License-Identifier: Apache-2.0 */
/* The EXEC (18.6), FILES_DELETE (18.7, 18.8), RECLAIM (18.11) and EGRESS
 * (18.9) suites. */
#include <stdio.h>

#include "conformance_int.h"

#define V MSB_CAT_VALUE
#define O MSB_CAT_OS

/* ---- EXEC ------------------------------------------------------------------------ */

static int exec_plant_wd(struct cf_ctx *c, msb_error **err)
{
	/* The caller creates the working directory: acquire does not promise it. */
	_cleanup_free_ char *marker = msb_conformance__in_work(c, ".probe-cwd");
	if (!marker)
		return msb__error_nomem(err);
	return msb_sandbox_write_file(c->s->sandbox, marker, NULL, 0, c->work, err);
}

static int exec_plain(struct cf_ctx *c, const char *const *argv, const char *want, const char *what)
{
	msb_exec_result res;
	if (msb_conformance__exec(c, NULL, argv, NULL, 0, &res) < 0)
		return -1;
	int code = res.exit_code;
	bool same = res.stdout_len == strlen(want) &&
		    memcmp(res.stdout_bytes, want, res.stdout_len) == 0;
	_cleanup_free_ char *got = msb_text_from_bytes(res.stdout_bytes, res.stdout_len);
	msb_exec_result_clear(&res);
	if (code != 0)
		return cf_fail(c, "%s exited %d", what, code);
	if (!same)
		return cf_fail(c, "%s printed `%s`, not `%s`", what, got ? got : "?", want);
	return 0;
}

static int exec_argv_runs(struct cf_ctx *c)
{
	const char *argv[] = {"printf", "ok-ran", NULL};
	return exec_plain(c, argv, "ok-ran", "a plain argv sequence");
}

static int exec_exit_code(struct cf_ctx *c)
{
	/* The shell form: `exit` is a builtin. */
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = "exit 7";
	req.working_directory = c->work;
	req.timeout = c->timeout;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	int r = msb_sandbox_exec(c->s->sandbox, &req, &res, &err);
	if (msb_conformance__ok(c, "`exit 7`", r, err) < 0)
		return -1;
	int code = res.exit_code;
	msb_exec_result_clear(&res);
	return code == 7 ? 0 : cf_fail(c, "`exit 7` came back as exit code %d", code);
}

static int exec_quoted(struct cf_ctx *c)
{
	/* One argument with spaces, a $( ) and quotes: printed back whole only
	 * if it arrived as one word, unevaluated. */
	static const char hostile[] = "a b$(echo injected)c 'q' \"d\" *";
	const char *argv[] = {"printf", "[%s]", hostile, NULL};
	char want[sizeof(hostile) + 2];
	snprintf(want, sizeof(want), "[%s]", hostile);
	return exec_plain(c, argv, want, "an argument with spaces and a $( )");
}

static int exec_wd(struct cf_ctx *c)
{
	const char *argv[] = {"pwd", NULL};
	msb_exec_result res;
	if (msb_conformance__exec(c, NULL, argv, NULL, 0, &res) < 0)
		return -1;
	size_t n = res.stdout_len;
	while (n > 0 && res.stdout_bytes[n - 1] == '\n')
		n--;
	bool same = n == strlen(c->work) && memcmp(res.stdout_bytes, c->work, n) == 0;
	_cleanup_free_ char *got = msb_text_from_bytes(res.stdout_bytes, n);
	msb_exec_result_clear(&res);
	return same ? 0
		    : cf_fail(c, "pwd answered `%s` against a working directory of `%s`",
			      got ? got : "?", c->work);
}

static int exec_timeout(struct cf_ctx *c)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	const char *argv[] = {"sleep", "30", NULL};
	req.argv = argv;
	req.working_directory = c->work;
	req.timeout = 1.0;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	int64_t start = msb__now_ns();
	int r = msb_sandbox_exec(c->s->sandbox, &req, &res, &err);
	double elapsed = (double)(msb__now_ns() - start) / 1e9;
	msb_exec_result_clear(&res);
	if (r == 0) {
		msb_error_free(err);
		return cf_fail(c, "a call over its 1 s timeout returned instead of raising "
				  "TimeoutError");
	}
	int code = err ? msb_error_code(err) : r;
	if (!msb_code_is(code, MSB_CAT_TIMEOUT)) {
		int f = cf_fail(c,
				"a call that overran its timeout raised %s (%s), not "
				"TimeoutError",
				msb_code_name(code), err ? msb_error_message(err) : "");
		msb_error_free(err);
		return f;
	}
	msb_error_free(err);
	if (elapsed < 0.5)
		return cf_fail(c,
			       "TimeoutError came after %.2f s, under half the 1 s bound: a "
			       "ceiling of the backend's own, not the caller's",
			       elapsed);
	if (elapsed > 4.0)
		return cf_fail(c,
			       "TimeoutError came after %.1f s against a 1 s bound: the "
			       "caller's timeout was not what bounded the call",
			       elapsed);
	return 0;
}

static const struct cf_probe exec_probes[] = {
	{"an-argv-sequence-runs",
	 "the positive control: every other probe asserts a fidelity or a refusal, and a backend "
	 "that ran nothing would pass them",
	 MSB_CAP_EXEC, exec_argv_runs},
	{"exit-code-fidelity",
	 "a kind's whole diagnostic is the exit code: normalising every failure to 1 turns `7 "
	 "errors` into `something went wrong`",
	 MSB_CAP_EXEC, exec_exit_code},
	{"argv-is-quoted",
	 "the argv form is the safe default only because it is never shell-split: an argument "
	 "with spaces or $( ) joined unquoted is an injection",
	 MSB_CAP_EXEC, exec_quoted},
	{"working-directory-is-honoured",
	 "a kind's paths are relative to the directory it named; an exec ignoring it reads and "
	 "writes where the caller cannot predict",
	 MSB_CAP_EXEC, exec_wd},
	{"a-timeout-raises-timeout-error",
	 "TimeoutError means the caller's bound expired and nothing else; run last, because a "
	 "backend may discard the sandbox to stop the command",
	 MSB_CAP_EXEC, exec_timeout},
};

const struct cf_suite msb_conformance__exec_suite = {
	MSB_SUITE_EXEC, MSB_CAP_EXEC, exec_probes, MSB_ARRAY_SIZE(exec_probes), exec_plant_wd,
};

/* ---- FILES_DELETE ---------------------------------------------------------------- */

static int rm(struct cf_ctx *c, const char *path, bool recursive, msb_error **err)
{
	return msb_sandbox_remove(c->s->sandbox, path, c->work, recursive, err);
}

static int rm_ok(struct cf_ctx *c, const char *path, bool recursive, const char *what)
{
	msb_error *err = NULL;
	int r = rm(c, path, recursive, &err);
	return msb_conformance__ok(c, what, r, err);
}

static int rm_refused(struct cf_ctx *c, const char *path, bool recursive, unsigned cats,
		      const char *want, const char *what)
{
	msb_error *err = NULL;
	int r = rm(c, path, recursive, &err);
	return msb_conformance__refused(c, what, r, err, 0, cats, want);
}

static int plant_in(struct cf_ctx *c, const char *rel, const char *text)
{
	_cleanup_free_ char *p = msb_conformance__in_work(c, rel);
	return p ? msb_conformance__plant_file(c, p, text) : cf_fail(c, "out of memory");
}

static int plant_out(struct cf_ctx *c, const char *rel, const char *text)
{
	_cleanup_free_ char *p = msb_conformance__in_outside(c, rel);
	return p ? msb_conformance__plant_file(c, p, text) : cf_fail(c, "out of memory");
}

/* W/link -> W-outside/target */
static int plant_link_out(struct cf_ctx *c, const char *link, const char *target)
{
	_cleanup_free_ char *l = msb_conformance__in_work(c, link);
	_cleanup_free_ char *t =
		target ? msb_conformance__in_outside(c, target) : strdup(c->outside);
	return l && t ? msb_conformance__plant_link(c, l, t) : cf_fail(c, "out of memory");
}

static int outside_present(struct cf_ctx *c, const char *rel, const char *what)
{
	_cleanup_free_ char *p = msb_conformance__outside_rel(c, rel);
	return p ? msb_conformance__present(c, p, what) : cf_fail(c, "out of memory");
}

static int del_removes(struct cf_ctx *c)
{
	if (plant_in(c, "doomed.txt", "to be removed\n") < 0 ||
	    plant_in(c, "bystander.txt", "not the target\n") < 0 ||
	    rm_ok(c, "doomed.txt", false, "removing doomed.txt") < 0 ||
	    msb_conformance__absent(c, "doomed.txt", "the removed file is still there") < 0)
		return -1;
	return msb_conformance__present(c, "bystander.txt", "a bystander file");
}

static int del_missing(struct cf_ctx *c)
{
	if (plant_in(c, "was-here.txt", "gone after the first call\n") < 0 ||
	    rm_ok(c, "was-here.txt", false, "the first removal") < 0)
		return -1;
	return rm_ok(c, "was-here.txt", false, "removing a path that is already gone");
}

static int del_link_not_followed(struct cf_ctx *c)
{
	if (plant_out(c, "target.txt", "outside\n") < 0 ||
	    plant_link_out(c, "link-out", "target.txt") < 0 ||
	    rm_ok(c, "link-out", false, "removing a link") < 0)
		return -1;
	bool yes = true;
	if (msb_conformance__test(c, "-L", "link-out", &yes) < 0)
		return -1;
	if (yes)
		return cf_fail(c, "the removed link is still there");
	return outside_present(c, "target.txt", "the link's target (the removal followed it)");
}

static int del_linked_parent(struct cf_ctx *c)
{
	if (plant_out(c, "target.txt", "outside\n") < 0 ||
	    plant_link_out(c, "link-dir", NULL) < 0 ||
	    rm_refused(c, "link-dir/target.txt", false, V, "ValueError",
		       "removing through a linked parent") < 0)
		return -1;
	return outside_present(c, "target.txt",
			       "the target behind a refused linked-parent removal");
}

static int del_dir_needs_recursive(struct cf_ctx *c)
{
	if (plant_in(c, "dir/keeps.txt", "a directory\n") < 0 ||
	    rm_refused(c, "dir", false, O, "OSError",
		       "removing a non-empty directory without recursive") < 0)
		return -1;
	return msb_conformance__present(c, "dir/keeps.txt", "the refused directory's file");
}

static int del_empty_dir_needs_recursive(struct cf_ctx *c)
{
	/* Planted through exec: plant_file cannot make an empty anything. */
	const char *argv[] = {"mkdir", "-p", "empty", NULL};
	msb_exec_result res;
	if (msb_conformance__exec(c, NULL, argv, NULL, 0, &res) < 0)
		return -1;
	int code = res.exit_code;
	msb_exec_result_clear(&res);
	if (code != 0)
		return cf_fail(c, "`mkdir -p empty` exited %d", code);
	if (rm_refused(c, "empty", false, O, "OSError",
		       "removing an empty directory without recursive") < 0)
		return -1;
	return msb_conformance__present(c, "empty", "the refused empty directory");
}

static int del_recursive(struct cf_ctx *c)
{
	if (plant_in(c, "tree/leaf.txt", "in the tree\n") < 0 ||
	    plant_in(c, "tree/sub/deeper.txt", "deeper\n") < 0 ||
	    plant_in(c, "next-to-tree.txt", "not in the tree\n") < 0 ||
	    rm_ok(c, "tree", true, "removing a tree recursively") < 0 ||
	    msb_conformance__absent(c, "tree", "the tree survived a recursive removal") < 0)
		return -1;
	return msb_conformance__present(c, "next-to-tree.txt", "a file beside the tree");
}

static int del_interior_link(struct cf_ctx *c)
{
	if (plant_out(c, "interior-target.txt", "outside the tree\n") < 0 ||
	    plant_in(c, "linked-tree/leaf.txt", "in the tree\n") < 0 ||
	    plant_link_out(c, "linked-tree/inside-link", "interior-target.txt") < 0 ||
	    plant_link_out(c, "linked-tree/dir-link", NULL) < 0 ||
	    rm_ok(c, "linked-tree", true, "removing a tree holding links") < 0 ||
	    msb_conformance__absent(c, "linked-tree", "the tree survived a recursive removal") < 0)
		return -1;
	if (outside_present(c, "interior-target.txt",
			    "the target of a link inside the removed tree") < 0)
		return -1;
	return outside_present(c, "secret.txt", "the contents of a directory linked from the tree");
}

static int del_wd(struct cf_ctx *c)
{
	if (plant_in(c, "ground.txt", "still standing\n") < 0 ||
	    rm_refused(c, ".", true, V, "ValueError", "removing the working directory itself") < 0)
		return -1;
	return msb_conformance__present(c, "ground.txt", "a file in the refused working directory");
}

static int del_outside(struct cf_ctx *c)
{
	_cleanup_free_ char *rel = msb_conformance__outside_rel(c, "target.txt");
	if (!rel)
		return cf_fail(c, "out of memory");
	if (plant_out(c, "target.txt", "outside\n") < 0 ||
	    rm_refused(c, rel, false, V, "ValueError",
		       "removing a path outside the working directory") < 0)
		return -1;
	return msb_conformance__present(c, rel, "the target of a refused outside removal");
}

static int plant_secret(struct cf_ctx *c, msb_error **err)
{
	/* The delete and reclaim probes plant their own fixtures; this one file
	 * stands behind the directory links they plant. */
	if (plant_out(c, "secret.txt", "the guest must not reach this\n") < 0)
		return msb_error_set(err, MSB_E_RUNTIME, "%s", c->failure ? c->failure : "failed");
	return 0;
}

#define DEL (MSB_CAP_FILES_DELETE | MSB_CAP_EXEC)

static const struct cf_probe files_delete_probes[] = {
	{"a-removal-removes",
	 "the positive control: a backend that removed nothing would pass every refusal probe", DEL,
	 del_removes},
	{"a-missing-path-is-success",
	 "cleanup runs in a finally; a missing path raising a second failure buries the first and "
	 "breaks every finally-based cleanup",
	 DEL, del_missing},
	{"a-link-is-removed-never-followed",
	 "a removal that resolved a link deletes a target the guest chose, outside the working "
	 "directory, without a byte coming back",
	 DEL, del_link_not_followed},
	{"a-path-through-a-linked-parent-is-refused",
	 "a path whose parent is a link passes every lexical test and still reaches outside", DEL,
	 del_linked_parent},
	{"a-directory-needs-recursive",
	 "recursive is a word the caller must say: the alternative is an irreversible operation "
	 "that reads like a one-file delete",
	 DEL, del_dir_needs_recursive},
	{"an-empty-directory-needs-recursive",
	 "the empty case on its own, the one a backend could quietly carve out with an implicit "
	 "rmdir",
	 DEL, del_empty_dir_needs_recursive},
	{"recursive-removes-the-tree",
	 "the capability's other half, and scoped to the tree: its neighbour stays", DEL,
	 del_recursive},
	{"a-link-inside-a-recursive-removal-is-unlinked-not-followed",
	 "a recursive delete that resolves an interior link deletes outside the working directory; "
	 "only this shape reaches it",
	 DEL, del_interior_link},
	{"the-working-directory-is-refused",
	 "the working directory is the confinement root: removing it takes the next run's ground",
	 DEL, del_wd},
	{"a-path-outside-is-refused",
	 "the boundary itself: a removal that reaches outside needs no link to do its damage", DEL,
	 del_outside},
};

const struct cf_suite msb_conformance__files_delete = {
	MSB_SUITE_FILES_DELETE, MSB_CAP_FILES_DELETE,
	files_delete_probes,	MSB_ARRAY_SIZE(files_delete_probes),
	plant_secret,
};

/* ---- RECLAIM ---------------------------------------------------------------------- */

static int rc(struct cf_ctx *c, const char *dir, msb_error **err)
{
	return msb_sandbox_reclaim(c->s->sandbox, dir, c->work, c->timeout, err);
}

static int rc_ok(struct cf_ctx *c, const char *dir, const char *what)
{
	msb_error *err = NULL;
	int r = rc(c, dir, &err);
	return msb_conformance__ok(c, what, r, err);
}

/* Either refused as ValueError or served harmlessly; the caller checks harm. */
static int rc_refused_or_ok(struct cf_ctx *c, const char *dir, const char *what)
{
	msb_error *err = NULL;
	int r = rc(c, dir, &err);
	if (r == 0)
		return 0;
	return msb_conformance__refused(c, what, r, err, 0, V,
					"ValueError (or a harmless success)");
}

static int rc_removes(struct cf_ctx *c)
{
	if (plant_in(c, "c1/a.txt", "call output\n") < 0 ||
	    plant_in(c, "c1/d/b.txt", "nested call output\n") < 0 ||
	    plant_in(c, "keep.txt", "not the call's\n") < 0 ||
	    rc_ok(c, "c1", "reclaiming c1") < 0 ||
	    msb_conformance__absent(c, "c1", "the reclaimed directory is still there") < 0)
		return -1;
	return msb_conformance__present(c, "keep.txt", "a file beside the reclaimed directory");
}

static int rc_absent(struct cf_ctx *c)
{
	return rc_ok(c, "never-made", "reclaiming a directory the call never created");
}

static int rc_replaced_by_link(struct cf_ctx *c)
{
	if (plant_out(c, "c2/target.txt", "outside\n") < 0 || plant_link_out(c, "c2", "c2") < 0 ||
	    rc_refused_or_ok(c, "c2", "reclaiming a directory the guest replaced by a link") < 0)
		return -1;
	return outside_present(c, "c2/target.txt",
			       "the link's target outside the working directory");
}

static int rc_replaced_ancestor(struct cf_ctx *c)
{
	if (plant_out(c, "c3/f.txt", "outside\n") < 0 || plant_link_out(c, "anc", NULL) < 0 ||
	    rc_refused_or_ok(c, "anc/c3", "reclaiming under an ancestor replaced by a link") < 0)
		return -1;
	return outside_present(c, "c3/f.txt", "a file behind the linked ancestor");
}

static int rc_outside(struct cf_ctx *c)
{
	_cleanup_free_ char *rel = msb_conformance__outside_rel(c, "c4");
	if (!rel)
		return cf_fail(c, "out of memory");
	if (plant_out(c, "c4/f.txt", "outside\n") < 0)
		return -1;
	msb_error *err = NULL;
	int r = rc(c, rel, &err);
	if (msb_conformance__refused(c, "reclaiming a directory outside the working directory", r,
				     err, 0, V, "ValueError") < 0)
		return -1;
	return outside_present(c, "c4/f.txt", "the outside directory");
}

static int rc_wd(struct cf_ctx *c)
{
	if (plant_in(c, "ground-r.txt", "still standing\n") < 0)
		return -1;
	msb_error *err = NULL;
	int r = rc(c, ".", &err);
	if (msb_conformance__refused(c, "reclaiming the working directory itself", r, err, 0, V,
				     "ValueError") < 0)
		return -1;
	return msb_conformance__present(c, "ground-r.txt",
					"a file in the refused working directory");
}

static int rc_interior_link(struct cf_ctx *c)
{
	if (plant_out(c, "c5-target.txt", "outside\n") < 0 ||
	    plant_in(c, "c5/leaf.txt", "in the call\n") < 0 ||
	    plant_link_out(c, "c5/inner", "c5-target.txt") < 0 ||
	    plant_link_out(c, "c5/dir", NULL) < 0 || rc_ok(c, "c5", "reclaiming c5") < 0 ||
	    msb_conformance__absent(c, "c5", "the reclaimed directory is still there") < 0 ||
	    outside_present(c, "c5-target.txt", "the target of a link inside the reclaimed tree") <
		    0)
		return -1;
	return outside_present(c, "secret.txt", "the contents of a directory linked from the tree");
}

#define RC (MSB_CAP_RECLAIM | MSB_CAP_EXEC)

static const struct cf_probe reclaim_probes[] = {
	{"reclaim-removes-the-directory",
	 "the positive control: a reclaim that removed nothing passes every refusal and leaves the "
	 "call's files for the next call",
	 RC, rc_removes},
	{"an-absent-directory-is-success",
	 "a call may never have made its directory, or the guest removed it: cleanup must not fail "
	 "on nothing",
	 RC, rc_absent},
	{"a-directory-replaced-by-a-link-loses-only-the-link",
	 "the guest can swap its call directory for a link before cleanup; following it deletes "
	 "what the guest could not",
	 RC, rc_replaced_by_link},
	{"a-replaced-ancestor-is-not-followed",
	 "the reach rule holds for every component: an ancestor swapped for a link points the "
	 "removal outside",
	 RC, rc_replaced_ancestor},
	{"an-outside-target-is-refused",
	 "reclaim removes a child of the working directory and nothing else", RC, rc_outside},
	{"the-working-directory-is-refused",
	 "the working directory is the ground every later call stands on", RC, rc_wd},
	{"an-interior-link-is-unlinked-not-followed",
	 "a link inside the reclaimed tree is removed as a link; its target stays", RC,
	 rc_interior_link},
};

const struct cf_suite msb_conformance__reclaim = {
	MSB_SUITE_RECLAIM, MSB_CAP_RECLAIM, reclaim_probes, MSB_ARRAY_SIZE(reclaim_probes),
	plant_secret,
};

/* ---- EGRESS ------------------------------------------------------------------------ */

/* curl's status for url: 0 when no HTTP answer came at all. */
static int curl_status(struct cf_ctx *c, const char *url, int *status)
{
	char max_time[32];
	double t = c->egress->exec_timeout > 0 ? c->egress->exec_timeout : 30.0;
	snprintf(max_time, sizeof(max_time), "%.0f", t > 2 ? t - 1 : 1);
	const char *argv[] = {"curl",	      "-s",	    "-o",     "/dev/null", "-w",
			      "%{http_code}", "--max-time", max_time, url,	   NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.working_directory = c->work;
	req.timeout = t + 5;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	int r = msb_sandbox_exec(c->s->sandbox, &req, &res, &err);
	if (msb_conformance__ok(c, "running curl in the guest", r, err) < 0)
		return -1;
	int code = res.exit_code;
	char digits[4] = {0};
	if (res.stdout_len == 3)
		memcpy(digits, res.stdout_bytes, 3);
	msb_exec_result_clear(&res);
	if (code == 127 || code == 126)
		return cf_fail(c,
			       "curl is not installed in the guest (exit %d): the EGRESS suite "
			       "needs it",
			       code);
	*status = 0;
	for (int i = 0; i < 3 && digits[i] >= '0' && digits[i] <= '9'; i++)
		*status = *status * 10 + (digits[i] - '0');
	if (!digits[0])
		*status = 0;
	return 0;
}

static int eg_allowed(struct cf_ctx *c)
{
	int status = 0;
	if (curl_status(c, c->egress->allowed_url, &status) < 0)
		return -1;
	if (status >= 200 && status < 300)
		return 0;
	if (status == 0)
		return cf_fail(c, "the allowlisted URL `%s` was not reached at all",
			       c->egress->allowed_url);
	return cf_fail(c, "the allowlisted URL `%s` answered %d, not 2xx", c->egress->allowed_url,
		       status);
}

static int eg_denied(struct cf_ctx *c)
{
	int status = 0;
	if (curl_status(c, c->egress->denied_url, &status) < 0)
		return -1;
	if (status >= 200 && status < 300)
		return cf_fail(c,
			       "the URL off the allowlist `%s` answered %d: egress is not "
			       "confined to the allowlist",
			       c->egress->denied_url, status);
	return 0;
}

static const struct cf_probe egress_probes[] = {
	{"an-allowed-host-is-reachable",
	 "the positive control: a sandbox with no network at all refuses the denied host too, "
	 "and would pass the other probe while serving no allowlist",
	 MSB_CAP_EXEC, eg_allowed},
	{"a-denied-host-is-refused",
	 "the claim itself: a backend declaring allowlist that lets an unlisted host answer "
	 "enforces nothing the spec asked for",
	 MSB_CAP_EXEC, eg_denied},
};

const struct cf_suite msb_conformance__egress = {
	MSB_SUITE_EGRESS, MSB_CAP_EXEC, egress_probes, MSB_ARRAY_SIZE(egress_probes), NULL,
};
