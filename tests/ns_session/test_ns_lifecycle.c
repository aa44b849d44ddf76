/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A sandbox's life and its handles against the real `ns` backend (issue 15
 * findings 2, 3, 5, 7; checklist 7.10, 9.4, 9.29):
 *  - a handle is bound to its instance: after a disposal, or after its
 *    sandbox was taken down and the key acquired again, every call on it
 *    fails with MSB_E_SANDBOX_GONE and never reaches the successor;
 *  - an agent killed from outside fails the pending exec and every later
 *    call with MSB_E_SANDBOX_GONE naming how it died, and acquire refuses
 *    the key (SandboxUnclean) with the storage base kept until a disposal;
 *  - a shim that died and is a zombie (its parent does not reap it) is dead:
 *    not listed as running, calls and acquire refused the same way;
 *  - with the agent stopped, an exec returns within its own timeout, not a
 *    fixed connect/HELLO bound.
 * Needs root.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msb/msb.h>
#include <msb/ns.h>

static char root[64];

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void rm_tree(const char *path)
{
	pid_t p = fork();
	if (p == 0) {
		execlp("rm", "rm", "-rf", "--one-file-system", path, (char *)NULL);
		_exit(127);
	}
	if (p > 0)
		waitpid(p, NULL, 0);
}

static msb_backend *backend(void)
{
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_backend *b = NULL;
	msb_error *e = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &b, &e), 0, "%s", msb_error_message(e));
	return b;
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/msb-life-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
}

static void teardown(void)
{
	msb_backend *b = backend();
	msb_scope_purge p = {0};
	msb_backend_dispose_scope(b, "life", "t", &p, NULL);
	msb_backend_unref(b);
	rm_tree(root);
}

TestSuite(ns_lifecycle, .init = setup, .fini = teardown, .timeout = 120);

static const msb_key KEY = {"life", "t", "a", NULL};

static msb_spec *spec(void)
{
	msb_spec_builder *sb = msb_spec_builder_new("life");
	msb_spec *s = NULL;
	cr_assert_eq(msb_spec_build(sb, &s, NULL), 0);
	msb_spec_builder_free(sb);
	return s;
}

static int acquire(msb_backend *b, msb_sandbox **out, msb_error **err)
{
	msb_spec *s = spec();
	int r = msb_backend_acquire(b, &KEY, s, out, err);
	msb_spec_unref(s);
	return r;
}

static msb_sandbox *acquire_ok(msb_backend *b)
{
	msb_sandbox *sb = NULL;
	msb_error *e = NULL;
	cr_assert_eq(acquire(b, &sb, &e), 0, "acquire: %s", msb_error_message(e));
	return sb;
}

static int sh(msb_sandbox *sb, const char *cmd, double timeout, msb_exec_result *res,
	      msb_error **err)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = cmd;
	req.timeout = timeout;
	memset(res, 0, sizeof(*res));
	return msb_sandbox_exec(sb, &req, res, err);
}

static void sh_ok(msb_sandbox *sb, const char *cmd, const char *want)
{
	msb_exec_result res;
	msb_error *e = NULL;
	cr_assert_eq(sh(sb, cmd, 30, &res, &e), 0, "`%s`: %s", cmd, msb_error_message(e));
	cr_assert_str_eq((char *)res.stdout_bytes, want, "`%s`", cmd);
	msb_exec_result_clear(&res);
}

static void dispose(msb_backend *b)
{
	msb_disposal_failure *f = NULL;
	cr_assert_eq(msb_backend_dispose(b, &KEY, NULL, NULL, &f, NULL), 0);
	cr_assert_null(f, "the disposal failed");
}

/* The sandbox's state directory, and a pid file in it. */
static void state_dir(char *out, size_t size)
{
	char ns[80];
	snprintf(ns, sizeof(ns), "%s/ns", root);
	DIR *d = opendir(ns);
	cr_assert_not_null(d);
	struct dirent *de;
	out[0] = '\0';
	while ((de = readdir(d)))
		if (strncmp(de->d_name, "msb-", 4) == 0)
			snprintf(out, size, "%s/%.40s", ns, de->d_name);
	closedir(d);
	cr_assert_neq(out[0], '\0', "no sandbox under %s", ns);
}

static pid_t pid_in(const char *file)
{
	char dir[256], path[320], text[64] = "";
	state_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f, "no %s", path);
	cr_assert_not_null(fgets(text, sizeof(text), f));
	fclose(f);
	return (pid_t)strtol(text, NULL, 10);
}

/* Every call a handle offers fails with SandboxGone, its message saying `why`. */
static void assert_gone(msb_sandbox *sb, const char *why)
{
	msb_error *e = NULL;
	msb_exec_result res;
	cr_assert_eq(sh(sb, "echo reached > reached; echo reached", 10, &res, &e),
		     MSB_E_SANDBOX_GONE, "exec: %s", e ? msb_error_message(e) : "succeeded");
	cr_assert(strstr(msb_error_message(e), why), "exec: %s", msb_error_message(e));
	msb_error_free(e);
	e = NULL;
	uint8_t *data = NULL;
	size_t len = 0;
	cr_assert_eq(msb_sandbox_read_file(sb, "b-only", NULL, 1024, &data, &len, &e),
		     MSB_E_SANDBOX_GONE, "read_file: %s", e ? msb_error_message(e) : "succeeded");
	msb_error_free(e);
	e = NULL;
	const uint8_t x[] = "x";
	cr_assert_eq(msb_sandbox_write_file(sb, "from-a", x, 1, NULL, &e), MSB_E_SANDBOX_GONE,
		     "write_file: %s", e ? msb_error_message(e) : "succeeded");
	msb_error_free(e);
	e = NULL;
	bool present = false, supported = false;
	msb_entry ent = {0};
	cr_assert_eq(msb_sandbox_stat_file(sb, "b-only", NULL, &present, &ent, &e),
		     MSB_E_SANDBOX_GONE);
	msb_error_free(e);
	e = NULL;
	msb_fingerprint fp = {0};
	cr_assert_eq(msb_sandbox_fingerprint(sb, &supported, &fp, &e), MSB_E_SANDBOX_GONE,
		     "fingerprint: %s", e ? msb_error_message(e) : "succeeded");
	msb_error_free(e);
}

/* B holds what B wrote and nothing A tried. */
static void assert_untouched(msb_sandbox *b)
{
	sh_ok(b, "cat b-only; ls", "b\nb-only\n");
}

/* Finding 3: acquire A, dispose, acquire B - A reaches nothing of B. */
Test(ns_lifecycle, a_disposed_handle_never_reaches_the_next_instance_9_29)
{
	msb_backend *b = backend();
	msb_sandbox *a = acquire_ok(b);
	sh_ok(a, "echo a", "a\n");
	dispose(b);
	msb_sandbox *n = acquire_ok(b);
	cr_assert_str_neq(msb_sandbox_instance_id(a), msb_sandbox_instance_id(n));
	const uint8_t bb[] = "b\n";
	cr_assert_eq(msb_sandbox_write_file(n, "b-only", bb, 2, NULL, NULL), 0);
	assert_gone(a, "it was disposed of");
	assert_untouched(n);
	msb_sandbox_free(a);
	msb_sandbox_free(n);
	msb_backend_unref(b);
}

/* The same when the old sandbox was taken down (its shim stopped) and the
 * key acquired again: the successor has the same name, never the same
 * directory. */
Test(ns_lifecycle, a_taken_down_handle_never_reaches_the_replacement)
{
	msb_backend *b = backend();
	msb_sandbox *a = acquire_ok(b);
	sh_ok(a, "echo a", "a\n");
	pid_t shim = pid_in("shim.pid");
	cr_assert_eq(kill(shim, SIGTERM), 0);
	for (int i = 0; i < 400 && kill(shim, 0) == 0; i++)
		usleep(10 * 1000);
	msb_sandbox *n = acquire_ok(b);
	const uint8_t bb[] = "b\n";
	cr_assert_eq(msb_sandbox_write_file(n, "b-only", bb, 2, NULL, NULL), 0);
	assert_gone(a, "is gone");
	assert_untouched(n);
	msb_sandbox_free(a);
	msb_sandbox_free(n);
	msb_backend_unref(b);
}

struct pending {
	msb_sandbox *sb;
	int rc;
	msb_error *err;
};

static void *run_pending(void *arg)
{
	struct pending *p = arg;
	msb_exec_result res;
	p->rc = sh(p->sb, "sleep 30", 60, &res, &p->err);
	if (p->rc == 0)
		msb_exec_result_clear(&res);
	return NULL;
}

/* Finding 2: the agent killed from outside. */
Test(ns_lifecycle, a_killed_agent_is_reported_and_its_files_kept_7_10)
{
	msb_backend *b = backend();
	msb_sandbox *sb = acquire_ok(b);
	sh_ok(sb, "echo keep > kept; echo ok", "ok\n");
	struct pending p = {sb, 0, NULL};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, run_pending, &p), 0);
	usleep(500 * 1000);
	cr_assert_eq(kill(pid_in("init.pid"), SIGKILL), 0);
	pthread_join(t, NULL);
	/* The pending exec: typed, and says how. */
	cr_assert_eq(p.rc, MSB_E_SANDBOX_GONE, "pending exec: %d %s", p.rc,
		     p.err ? msb_error_message(p.err) : "");
	cr_assert(strstr(msb_error_message(p.err), "killed by signal 9"), "%s",
		  msb_error_message(p.err));
	msb_error_free(p.err);
	/* The next calls. */
	assert_gone(sb, "killed by signal 9");
	/* The next acquire: refused, never an empty sandbox in its place. */
	msb_sandbox *n = NULL;
	msb_error *e = NULL;
	cr_assert_eq(acquire(b, &n, &e), MSB_E_UNCLEAN, "acquire: %s",
		     e ? msb_error_message(e) : "succeeded");
	cr_assert(strstr(msb_error_message(e), "killed by signal 9"), "%s", msb_error_message(e));
	msb_error_free(e);
	char dir[256], path[320];
	state_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/work/kept", dir);
	cr_assert_eq(access(path, F_OK), 0, "the storage base was wiped");
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_ns_entry *ents = NULL;
	size_t count = 0;
	cr_assert_eq(msb_ns_list(&o, &ents, &count, NULL), 0);
	cr_assert_eq(count, 1);
	cr_assert(ents[0].dead && !ents[0].alive);
	cr_assert(ents[0].reason && strstr(ents[0].reason, "killed by signal 9"));
	msb_ns_entries_free(ents, count);
	/* A disposal clears it; the next acquire starts afresh. */
	dispose(b);
	msb_sandbox *fresh = acquire_ok(b);
	sh_ok(fresh, "ls", "");
	msb_sandbox_free(fresh);
	msb_sandbox_free(sb);
	msb_backend_unref(b);
}

/* Finding 5: the shim killed and left a zombie by a parent that does not
 * reap it. The shim is started fork-fork-exec, so it is adopted by the
 * nearest subreaper: this test process. */
Test(ns_lifecycle, a_zombie_shim_is_dead)
{
	cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
	msb_backend *b = backend();
	msb_sandbox *sb = acquire_ok(b);
	sh_ok(sb, "echo keep > kept; echo ok", "ok\n");
	pid_t shim = pid_in("shim.pid");
	cr_assert_eq(kill(shim, SIGKILL), 0);
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	cr_assert_eq(waitid(P_PID, (id_t)shim, &si, WEXITED | WNOWAIT), 0,
		     "the shim is not our child: no subreaper?");
	usleep(200 * 1000); /* the init follows its shim (parent-death signal) */
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_ns_entry *ents = NULL;
	size_t count = 0;
	cr_assert_eq(msb_ns_list(&o, &ents, &count, NULL), 0);
	cr_assert_eq(count, 1);
	cr_assert(!ents[0].alive, "a zombie shim is listed as running");
	cr_assert(ents[0].dead && ents[0].reason && strstr(ents[0].reason, "zombie"), "%s",
		  ents[0].reason ? ents[0].reason : "no reason");
	msb_ns_entries_free(ents, count);
	assert_gone(sb, "its shim");
	msb_sandbox *n = NULL;
	msb_error *e = NULL;
	cr_assert_eq(acquire(b, &n, &e), MSB_E_UNCLEAN, "acquire: %s",
		     e ? msb_error_message(e) : "returned the dead instance");
	msb_error_free(e);
	waitpid(shim, NULL, 0);
	dispose(b);
	msb_sandbox *fresh = acquire_ok(b);
	sh_ok(fresh, "ls", "");
	msb_sandbox_free(fresh);
	msb_sandbox_free(sb);
	msb_backend_unref(b);
}

/* Finding 7: the agent stopped (SIGSTOP). A new handle's exec connects and
 * waits for HELLO within the exec's own timeout (it took a fixed 10 s). */
Test(ns_lifecycle, a_stopped_agent_costs_the_call_its_own_timeout_9_4)
{
	msb_backend *b = backend();
	msb_sandbox *sb = acquire_ok(b);
	sh_ok(sb, "echo ok", "ok\n");
	pid_t init = pid_in("init.pid");
	cr_assert_eq(kill(init, SIGSTOP), 0);
	msb_sandbox *fresh = acquire_ok(b); /* no connection yet */
	msb_exec_result res;
	msb_error *e = NULL;
	double t0 = now_s();
	int r = sh(fresh, "echo ok", 2.0, &res, &e);
	double took = now_s() - t0;
	cr_assert_eq(r, MSB_E_TIMEOUT, "exec: %d %s", r, e ? msb_error_message(e) : "");
	int signal = -1;
	cr_assert(msb_error_timeout(e, &signal, NULL, NULL));
	cr_assert_eq(signal, MSB_SIGNAL_ABSENT, "the command never started");
	msb_error_free(e);
	cr_assert(took >= 1.5 && took < 6.0, "a 2 s exec took %.2f s", took);
	/* The handle with a connection: the kill report's grace follows the
	 * timeout, bounded all the same. */
	e = NULL;
	t0 = now_s();
	r = sh(sb, "echo ok", 2.0, &res, &e);
	took = now_s() - t0;
	cr_assert_eq(r, MSB_E_TIMEOUT, "exec: %d %s", r, e ? msb_error_message(e) : "");
	msb_error_free(e);
	cr_assert(took < 6.0, "a 2 s exec took %.2f s", took);
	cr_assert_eq(kill(init, SIGCONT), 0);
	sh_ok(fresh, "echo again", "again\n");
	msb_sandbox_free(fresh);
	msb_sandbox_free(sb);
	msb_backend_unref(b);
}
