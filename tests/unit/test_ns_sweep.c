/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The label sweep that ns, oci and vm share (src/backends/ns/ns_sweep.c),
 * on a plain directory with a scripted purge: no sandbox, no root. It takes
 * what the labels select and nothing else, counts and reports (7.4, 7.3),
 * removes the debris of an acquire that died before its labels, and never
 * follows a link put where a sandbox directory should be (docs/security.md).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backends/ns/ns_sweep.h"
#include "util/fs.h"

static char state[64], outside[80];

struct purges {
	int calls;
	const char *fail; /* this sandbox's purge fails (MSB_E_RUNTIME) */
};

static int purge(void *ctx, const char *name, int dfd, const msb_ns_labels *l, msb_error **err)
{
	struct purges *p = ctx;
	cr_assert(dfd >= 0 && l->scope);
	p->calls++;
	if (p->fail && strcmp(name, p->fail) == 0)
		return msb_error_set(err, MSB_E_RUNTIME, "it would not stop");
	return 0;
}

static void sandbox_dir(const char *dir, const char *name, const char *thread)
{
	char path[160];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	cr_assert_eq(mkdir(path, 0700), 0);
	if (!thread)
		return;
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(dfd >= 0);
	char scope[] = "s", agent_dir[] = "/w", kind[] = "codeact", instance[] = "i";
	msb_ns_labels l = {.scope = scope,
			   .thread_id = (char *)thread,
			   .agent_dir = agent_dir,
			   .kind = kind,
			   .instance_id = instance};
	msb_error *err = NULL;
	cr_assert_eq(msb_ns__labels_write(dfd, &l, &err), 0, "%s", msb_error_message(err));
	close(dfd);
}

static bool exists(const char *dir, const char *name)
{
	char path[160];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

static void setup(void)
{
	snprintf(state, sizeof(state), "/tmp/msb-sweep-%d", (int)getpid());
	snprintf(outside, sizeof(outside), "%s-outside", state);
	cr_assert_eq(mkdir(state, 0700), 0);
	cr_assert_eq(mkdir(outside, 0700), 0);
}

static void teardown(void)
{
	msb__rm_rf(state);
	msb__rm_rf(outside);
}

TestSuite(ns_sweep, .init = setup, .fini = teardown);

Test(ns_sweep, takes_only_the_selected_never_follows_a_link_7_4)
{
	sandbox_dir(state, "msb-taken", "t1");
	sandbox_dir(state, "msb-stuck", "t1");
	sandbox_dir(state, "msb-other", "t2");
	sandbox_dir(state, "msb-debris", NULL); /* an acquire died before its labels */
	sandbox_dir(state, "not-a-sandbox", "t1");
	sandbox_dir(outside, "msb-target", "t1"); /* selected labels, behind a link */
	char target[160], link[160];
	snprintf(target, sizeof(target), "%s/msb-target", outside);
	snprintf(link, sizeof(link), "%s/msb-link", state);
	cr_assert_eq(symlink(target, link), 0);

	struct purges p = {.fail = "msb-stuck"};
	msb_scope_purge out = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_ns__dispose_scope(state, "ns", purge, &p, "s", "t1", &out, &err), 0, "%s",
		     msb_error_message(err));
	cr_expect_eq(out.disposed, 1);
	cr_expect_eq(out.undisposed, 1);
	cr_expect_eq(p.calls, 2);
	cr_expect(!exists(state, "msb-taken"));
	cr_expect(exists(state, "msb-stuck"), "a sandbox that would not stop keeps its directory");
	cr_expect(exists(state, "msb-other"));
	cr_expect(!exists(state, "msb-debris"));
	cr_expect(exists(state, "not-a-sandbox"));
	cr_expect(exists(state, "msb-link") && exists(outside, "msb-target/labels.json"),
		  "the sweep followed a link");
}

Test(ns_sweep, dispose_folds_the_failures_and_a_missing_root_is_empty_7_3)
{
	sandbox_dir(state, "msb-stuck", "t1");
	struct purges p = {.fail = "msb-stuck"};
	msb_key key = {.scope = "s", .thread_id = "t1", .agent_dir = "/w"};
	msb_disposal_failure *f = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns__dispose(state, purge, &p, &key, NULL, NULL, &f, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert_not_null(f);
	cr_expect_eq(f->code, MSB_DISPOSAL_TIMEOUT);
	cr_expect(strstr(f->detail, "msb-stuck: it would not stop"), "%s", f->detail);
	msb_disposal_failure_free(f);

	char missing[96];
	snprintf(missing, sizeof(missing), "%s/none", state);
	f = NULL;
	cr_assert_eq(msb_ns__dispose(missing, purge, &p, &key, NULL, NULL, &f, &err), 0);
	cr_expect_null(f);
	cr_expect_eq(p.calls, 1);
}
