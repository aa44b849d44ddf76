/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Resource limits of the `ns` backend, through the public API against the
 * real backend (router at floor `container`; env MSB_SHIM, MSB_AGENT and, for
 * the CLI case, MSB_CLI): the spec's limits land in the cgroup files, a
 * fork bomb is stopped by pids, a 1 GiB allocation under 256 MiB is killed,
 * a full writable layer fails with no space - each reported by its flag in
 * the result - and the sandbox serves the next call every time. Needs root
 * (cgroups; the unprivileged case drops to nobody itself). Each test has
 * its own short state root under /tmp, purged and checked at the end.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <msb/msb.h>
#include <msb/ns.h>

#define NOBODY 65534

static char root[64];	     /* the test's state root */
static char cgroups[8][512]; /* cgroup directories seen, checked gone after purge */
static size_t n_cgroups;

/* ---- set-up and teardown -------------------------------------------------- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Dispose every sandbox under the root, as a purge from another process
 * would (labels on disk), then remove the root. */
static void purge_all(void)
{
	if (!root[0])
		return;
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_backend *b = NULL;
	msb_ns_entry *e = NULL;
	size_t n = 0;
	if (msb_ns_backend_new(&o, &b, NULL) == 0 && msb_ns_list(&o, &e, &n, NULL) == 0) {
		for (size_t i = 0; i < n; i++) {
			msb_scope_purge p = {0};
			msb_backend_dispose_scope(b, e[i].scope, e[i].thread_id, &p, NULL);
		}
		msb_ns_entries_free(e, n);
	}
	/* The pool `msb run` keeps (docs/pool.md) goes too. */
	if (b)
		msb_ns_pool_drain(b, NULL, NULL, NULL);
	msb_backend_unref(b);
}

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/msbl-XXXXXX");
	cr_assert_not_null(mkdtemp(root));
	n_cgroups = 0;
}

static void teardown(void)
{
	purge_all();
	nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	root[0] = '\0';
}

TestSuite(limits, .init = setup, .fini = teardown, .timeout = 120);

/* Purge, then nothing may remain: no sandbox directory, no cgroup. */
static void assert_purged(void)
{
	purge_all();
	char ns[128];
	snprintf(ns, sizeof(ns), "%s/ns", root);
	DIR *d = opendir(ns);
	if (d) {
		struct dirent *de;
		while ((de = readdir(d)))
			cr_assert(strncmp(de->d_name, "msb-", 4) != 0, "left behind: %s/%s", ns,
				  de->d_name);
		closedir(d);
	}
	for (size_t i = 0; i < n_cgroups; i++)
		cr_assert(access(cgroups[i], F_OK) < 0, "cgroup left behind: %s", cgroups[i]);
}

/* ---- the router, specs, execs --------------------------------------------- */

static msb_router *router_with(const msb_ns_options *given)
{
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	if (given)
		o = *given;
	o.state_root = root;
	msb_backend *b = NULL;
	msb_error *e = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &b, &e), 0, "backend: %s", msb_error_message(e));
	msb_router_options ro = MSB_ROUTER_OPTIONS_INIT;
	ro.min_isolation = MSB_ISOLATION_CONTAINER;
	msb_router *r = NULL;
	cr_assert_eq(msb_router_new(&b, 1, &ro, &r, &e), 0, "router: %s", msb_error_message(e));
	msb_backend_unref(b);
	return r;
}

struct limits {
	uint64_t memory, pids, cpu, writable;
};

static msb_spec *spec_with(struct limits l)
{
	msb_spec_builder *b = msb_spec_builder_new("lim");
	msb_spec_builder_set_memory_bytes(b, l.memory);
	msb_spec_builder_set_pids_max(b, l.pids);
	msb_spec_builder_set_cpu_millis(b, l.cpu);
	msb_spec_builder_set_writable_bytes(b, l.writable);
	msb_spec *s = NULL;
	msb_error *e = NULL;
	cr_assert_eq(msb_spec_build(b, &s, &e), 0, "spec: %s", msb_error_message(e));
	msb_spec_builder_free(b);
	return s;
}

/* A thread id unique to this run: sandbox (and cgroup) names derive from the
 * key, and another run may be going on at the same time. */
static const char *tid(const char *name)
{
	static char buf[8][64];
	static unsigned next;
	char *b = buf[next++ % 8];
	snprintf(b, sizeof(buf[0]), "%s-%d", name, (int)getpid());
	return b;
}

static int acquire(msb_router *r, const char *thread, struct limits l, msb_sandbox **sb,
		   msb_error **err)
{
	msb_key key = {"lim", tid(thread), "agent", NULL};
	msb_spec *s = spec_with(l);
	int rc = msb_router_acquire(r, &key, s, NULL, sb, err);
	msb_spec_unref(s);
	return rc;
}

static msb_sandbox *acquire_ok(msb_router *r, const char *thread, struct limits l)
{
	msb_sandbox *sb = NULL;
	msb_error *e = NULL;
	cr_assert_eq(acquire(r, thread, l, &sb, &e), 0, "acquire: %s", msb_error_message(e));
	return sb;
}

static int sh(msb_sandbox *sb, const char *cmd, double timeout, msb_exec_result *res,
	      msb_error **err)
{
	const char *argv[] = {"sh", "-c", cmd, NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = timeout;
	memset(res, 0, sizeof(*res));
	return msb_sandbox_exec(sb, &req, res, err);
}

static void sh_ok(msb_sandbox *sb, const char *cmd, double timeout, msb_exec_result *res)
{
	msb_error *e = NULL;
	cr_assert_eq(sh(sb, cmd, timeout, res, &e), 0, "exec `%s`: %s", cmd, msb_error_message(e));
}

/* The sandbox still serves, and a quiet call reports no limit. */
static void assert_serves(msb_sandbox *sb)
{
	msb_exec_result res;
	sh_ok(sb, "echo ok", 30, &res);
	cr_assert_eq(res.exit_code, 0, "stderr: %s", (char *)res.stderr_bytes);
	cr_assert_str_eq((char *)res.stdout_bytes, "ok\n");
	cr_assert_not(res.oom_killed || res.pids_exhausted || res.no_space,
		      "a quiet call reports nothing (oom %d pids %d space %d)", res.oom_killed,
		      res.pids_exhausted, res.no_space);
	msb_exec_result_clear(&res);
}

/* ---- reading the sandbox from the host ----------------------------------- */

/* The one sandbox directory under the root. */
static void sandbox_dir(char *out, size_t size)
{
	char ns[128];
	snprintf(ns, sizeof(ns), "%s/ns", root);
	DIR *d = opendir(ns);
	cr_assert_not_null(d);
	struct dirent *de;
	out[0] = '\0';
	while ((de = readdir(d)))
		if (strncmp(de->d_name, "msb-", 4) == 0) {
			cr_assert_eq(out[0], '\0', "one sandbox expected");
			cr_assert_lt(snprintf(out, size, "%s/%s", ns, de->d_name), (int)size);
		}
	closedir(d);
	cr_assert_neq(out[0], '\0', "no sandbox under %s", ns);
}

static bool read_text(const char *path, char *out, size_t size)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	size_t n = fread(out, 1, size - 1, f);
	fclose(f);
	out[n] = '\0';
	return true;
}

/* Read `file` from whichever of the sandbox's recorded cgroup directories
 * has it (v2: one directory; v1: one per controller). */
static bool cg_read(const char *file, char *out, size_t size)
{
	char dir[256], rec[300], list[2048];
	sandbox_dir(dir, sizeof(dir));
	snprintf(rec, sizeof(rec), "%s/cgroups", dir);
	cr_assert(read_text(rec, list, sizeof(list)), "no cgroup record in %s", dir);
	for (char *line = list; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		bool seen = false;
		for (size_t i = 0; i < n_cgroups; i++)
			seen = seen || strcmp(cgroups[i], line) == 0;
		if (!seen && n_cgroups < 8)
			cr_assert_lt(snprintf(cgroups[n_cgroups++], sizeof(cgroups[0]), "%s", line),
				     (int)sizeof(cgroups[0]));
		char path[600];
		cr_assert_lt(snprintf(path, sizeof(path), "%s/%s", line, file), (int)sizeof(path));
		if (read_text(path, out, size)) {
			out[strcspn(out, "\n")] = '\0';
			return true;
		}
		line = nl ? nl + 1 : NULL;
	}
	return false;
}

static bool v2(void)
{
	char v[64];
	return cg_read("cgroup.controllers", v, sizeof(v)) && cg_read("memory.max", v, sizeof(v));
}

static void assert_cg(const char *v1_file, const char *v2_file, const char *want)
{
	char got[128];
	const char *file = v2() ? v2_file : v1_file;
	cr_assert(cg_read(file, got, sizeof(got)), "no %s in the sandbox's cgroups", file);
	cr_assert_str_eq(got, want, "%s", file);
}

static void assert_limits_read_back(uint64_t memory, uint64_t pids, uint64_t cpu_millis)
{
	char m[32], p[32], c[64];
	snprintf(m, sizeof(m), "%llu", (unsigned long long)memory);
	snprintf(p, sizeof(p), "%llu", (unsigned long long)pids);
	assert_cg("memory.limit_in_bytes", "memory.max", m);
	assert_cg("pids.max", "pids.max", p);
	if (v2()) {
		snprintf(c, sizeof(c), "%llu 100000", (unsigned long long)cpu_millis * 100);
		assert_cg("", "cpu.max", c);
	} else {
		snprintf(c, sizeof(c), "%llu", (unsigned long long)cpu_millis * 100);
		assert_cg("cpu.cfs_quota_us", "", c);
		assert_cg("cpu.cfs_period_us", "", "100000");
	}
}

/* The size of the writable layer, read from the host: the root of the
 * sandbox's init. */
static uint64_t layer_bytes(void)
{
	char dir[256], path[300], text[64];
	sandbox_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/init.pid", dir);
	cr_assert(read_text(path, text, sizeof(text)));
	snprintf(path, sizeof(path), "/proc/%ld/root/", strtol(text, NULL, 10));
	struct statfs st;
	cr_assert_eq(statfs(path, &st), 0, "statfs %s: %s", path, strerror(errno));
	return (uint64_t)st.f_blocks * (uint64_t)st.f_bsize;
}

/* ---- the Done-when cases -------------------------------------------------- */

/* A real fork bomb in its own session, bounded by its parent: after two
 * seconds python kills the whole group (it needs no fork to do so). */
#define FORK_BOMB                                                                                  \
	"python3 -c '\n"                                                                           \
	"import os, signal, subprocess, time\n"                                                    \
	"p = subprocess.Popen([\"sh\", \"-c\", \"f(){ f|f& }; f\"], start_new_session=True,\n"     \
	"                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"             \
	"time.sleep(2)\n"                                                                          \
	"p.wait()\n"                                                                               \
	"while True:\n"                                                                            \
	"    try:\n"                                                                               \
	"        os.killpg(p.pid, signal.SIGKILL)\n"                                               \
	"    except ProcessLookupError:\n"                                                         \
	"        break\n"                                                                          \
	"    time.sleep(0.01)\n"                                                                   \
	"print(\"bomb over\")\n"                                                                   \
	"'"

Test(limits, fork_bomb_stopped_by_pids)
{
	msb_router *r = router_with(NULL);
	msb_sandbox *sb = acquire_ok(r, "bomb", (struct limits){.pids = 64});
	assert_cg("pids.max", "pids.max", "64");
	char before[64], after[64];
	cr_assert(cg_read("pids.events", before, sizeof(before)));

	msb_exec_result res;
	sh_ok(sb, FORK_BOMB, 60, &res);
	cr_assert_eq(res.exit_code, 0, "stderr: %s", (char *)res.stderr_bytes);
	cr_assert_str_eq((char *)res.stdout_bytes, "bomb over\n");
	cr_assert(res.pids_exhausted, "the pids limit refused forks: pids_exhausted");
	cr_assert_not(res.oom_killed);
	msb_exec_result_clear(&res);
	cr_assert(cg_read("pids.events", after, sizeof(after)));
	cr_assert_str_neq(before, after, "pids.events counted the refusals");

	assert_serves(sb);
	msb_sandbox_free(sb);
	msb_router_free(r);
	assert_purged();
}

Test(limits, big_allocation_oom_killed)
{
	msb_router *r = router_with(NULL);
	msb_sandbox *sb = acquire_ok(r, "oom", (struct limits){.memory = 256ull << 20});
	assert_cg("memory.limit_in_bytes", "memory.max", "268435456");

	msb_exec_result res;
	sh_ok(sb, "exec python3 -c 'b = bytearray(1 << 30); print(len(b))'", 60, &res);
	cr_assert_eq(res.term_signal, SIGKILL, "killed, not finished: exit %d, stdout %s",
		     res.exit_code, (char *)res.stdout_bytes);
	cr_assert_eq(res.exit_code, 128 + SIGKILL);
	cr_assert_eq(res.stdout_len, 0, "the allocation never completed");
	cr_assert(res.oom_killed, "the OOM killer's kill is reported: oom_killed");
	cr_assert_not(res.pids_exhausted || res.no_space);
	msb_exec_result_clear(&res);

	/* An allocation under the limit still works. */
	sh_ok(sb, "python3 -c 'b = bytearray(64 << 20); print(len(b))'", 60, &res);
	cr_assert_str_eq((char *)res.stdout_bytes, "67108864\n");
	cr_assert_not(res.oom_killed);
	msb_exec_result_clear(&res);

	assert_serves(sb);
	msb_sandbox_free(sb);
	msb_router_free(r);
	assert_purged();
}

Test(limits, full_writable_layer_no_space)
{
	msb_router *r = router_with(NULL);
	msb_sandbox *sb = acquire_ok(r, "fill", (struct limits){.writable = 32ull << 20});
	cr_assert_eq(layer_bytes(), 32ull << 20, "the writable layer is the spec's size");

	msb_exec_result res;
	sh_ok(sb, "dd if=/dev/zero of=/tmp/fill bs=1M; echo \"dd=$?\"", 60, &res);
	cr_assert_str_eq((char *)res.stdout_bytes, "dd=1\n");
	cr_assert(strstr((char *)res.stderr_bytes, "No space left on device"), "stderr: %s",
		  (char *)res.stderr_bytes);
	cr_assert(res.no_space, "the full layer is reported: no_space");
	cr_assert_not(res.oom_killed || res.pids_exhausted);
	msb_exec_result_clear(&res);

	/* Still full: a write fails, and the flag says so again. */
	sh_ok(sb, "echo x > /tmp/more; echo \"rc=$?\"", 30, &res);
	cr_assert_str_eq((char *)res.stdout_bytes, "rc=1\n");
	cr_assert(res.no_space);
	msb_exec_result_clear(&res);

	/* Freed: the flag goes, the sandbox serves. */
	sh_ok(sb, "rm /tmp/fill && echo freed", 30, &res);
	cr_assert_str_eq((char *)res.stdout_bytes, "freed\n");
	cr_assert_not(res.no_space);
	msb_exec_result_clear(&res);
	assert_serves(sb);
	msb_sandbox_free(sb);
	msb_router_free(r);
	assert_purged();
}

/* tmpfs pages belong to no process: if the writable layer and /dev/shm could
 * hold the whole memory limit, filling them would leave the OOM killer only
 * live processes (the agent among them) and wedge the sandbox. Under a
 * memory limit they are sized to half and an eighth of it, so the fills end
 * in ENOSPC and the sandbox still serves. */
Test(limits, tmpfs_fills_cannot_take_the_memory_limit)
{
	msb_router *r = router_with(NULL);
	msb_sandbox *sb = acquire_ok(r, "tmpfs", (struct limits){.memory = 64ull << 20});
	cr_assert_eq(layer_bytes(), 32ull << 20, "the writable layer is half the memory limit");

	msb_exec_result res;
	sh_ok(sb,
	      "head -c 100000000 /dev/zero > /dev/shm/x; echo \"shm=$?\"; "
	      "head -c 100000000 /dev/zero > /tmp/y; echo \"layer=$?\"; "
	      "df -k /dev/shm | tail -1 | awk '{print $2}'",
	      60, &res);
	cr_assert_str_eq((char *)res.stdout_bytes, "shm=1\nlayer=1\n8192\n", "stdout: %s",
			 (char *)res.stdout_bytes);
	cr_assert(res.no_space, "the fills are reported: no_space");
	cr_assert_not(res.oom_killed, "nothing was OOM-killed");
	msb_exec_result_clear(&res);
	/* Both still full, and the sandbox serves. */
	sh_ok(sb, "echo ok", 30, &res);
	cr_assert_str_eq((char *)res.stdout_bytes, "ok\n");
	msb_exec_result_clear(&res);
	msb_sandbox_free(sb);
	msb_router_free(r);
	assert_purged();
}

/* The OOM killer prefers any workload to the agent: workloads start at the
 * highest score, and one can lower its own only to the agent's. */
Test(limits, workloads_are_the_oom_killers_first_choice)
{
	msb_router *r = router_with(NULL);
	msb_sandbox *sb = acquire_ok(r, "oomadj", (struct limits){0});
	msb_exec_result res;
	sh_ok(sb,
	      "cat /proc/self/oom_score_adj; echo 0 > /proc/self/oom_score_adj; "
	      "echo -1 > /proc/self/oom_score_adj 2>/dev/null || echo refused; "
	      "cat /proc/self/oom_score_adj",
	      30, &res);
	cr_assert_str_eq((char *)res.stdout_bytes, "1000\nrefused\n0\n", "stdout: %s",
			 (char *)res.stdout_bytes);
	msb_exec_result_clear(&res);
	char dir[256], path[300], text[64];
	sandbox_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/init.pid", dir);
	cr_assert(read_text(path, text, sizeof(text)));
	snprintf(path, sizeof(path), "/proc/%ld/oom_score_adj", strtol(text, NULL, 10));
	cr_assert(read_text(path, text, sizeof(text)));
	cr_assert(strtol(text, NULL, 10) <= 0, "the agent's score stays low: %s", text);
	msb_sandbox_free(sb);
	msb_router_free(r);
	assert_purged();
}

/* ---- read back, defaults, ceilings ---------------------------------------- */

Test(limits, spec_limits_and_defaults_read_back)
{
	msb_router *r = router_with(NULL);
	/* No limits in the spec: the backend's defaults (root). */
	msb_sandbox *sb = acquire_ok(r, "dflt", (struct limits){0});
	assert_limits_read_back(512ull << 20, 512, 1000);
	cr_assert_eq(layer_bytes(), 256ull << 20);
	assert_serves(sb);
	msb_sandbox_free(sb);
	assert_purged();

	/* Every limit from the spec. */
	sb = acquire_ok(
		r, "set",
		(struct limits){
			.memory = 128ull << 20, .pids = 100, .cpu = 250, .writable = 16ull << 20});
	assert_limits_read_back(128ull << 20, 100, 250);
	cr_assert_eq(layer_bytes(), 16ull << 20);
	assert_serves(sb);
	msb_sandbox_free(sb);
	msb_router_free(r);
	assert_purged();
}

Test(limits, above_the_backend_refused_at_acquire)
{
	msb_router *r = router_with(NULL);
	static const struct {
		struct limits l;
		const char *phrase;
	} cases[] = {
		{{.memory = 1ull << 30},
		 "resources.memory_bytes: the spec asks for 1073741824 but the `ns` backend allows "
		 "at most 536870912"},
		{{.pids = 513}, "resources.pids_max: the spec asks for 513"},
		{{.cpu = 2000}, "resources.cpu_millis: the spec asks for 2000"},
		{{.writable = 512ull << 20},
		 "resources.writable_bytes: the spec asks for 536870912"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		msb_sandbox *sb = NULL;
		msb_error *e = NULL;
		cr_assert_eq(acquire(r, "big", cases[i].l, &sb, &e), MSB_E_VALUE);
		cr_assert(strstr(msb_error_message(e), cases[i].phrase), "`%s` lacks `%s`",
			  msb_error_message(e), cases[i].phrase);
		cr_assert_null(sb);
		msb_error_free(e);
	}
	assert_purged();
	msb_router_free(r);

	/* A backend that allows more serves it. */
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.memory_bytes = 2ull << 30;
	r = router_with(&o);
	msb_sandbox *sb = acquire_ok(r, "big", (struct limits){.memory = 1ull << 30});
	assert_cg("memory.limit_in_bytes", "memory.max", "1073741824");
	msb_sandbox_free(sb);
	msb_router_free(r);
	assert_purged();
}

Test(limits, warm_sandbox_with_other_limits_refused)
{
	msb_router *r = router_with(NULL);
	msb_sandbox *a = acquire_ok(r, "warm", (struct limits){.pids = 64});
	msb_sandbox *b = acquire_ok(r, "warm", (struct limits){.pids = 64});
	cr_assert_str_eq(msb_sandbox_instance_id(a), msb_sandbox_instance_id(b), "warm reuse");
	msb_sandbox *c = NULL;
	msb_error *e = NULL;
	cr_assert_eq(acquire(r, "warm", (struct limits){.pids = 32}, &c, &e), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(e), "resources.pids_max: the warm sandbox"), "%s",
		  msb_error_message(e));
	cr_assert(strstr(msb_error_message(e), "runs with 64, this spec asks for 32"), "%s",
		  msb_error_message(e));
	msb_error_free(e);
	e = NULL;
	/* The default is a value too: 512 is not 64. */
	cr_assert_eq(acquire(r, "warm", (struct limits){0}, &c, &e), MSB_E_VALUE);
	msb_error_free(e);
	assert_cg("pids.max", "pids.max", "64");
	assert_serves(a);
	msb_sandbox_free(a);
	msb_sandbox_free(b);

	msb_key key = {"lim", tid("warm"), "agent", NULL};
	bool gone = false;
	cr_assert_eq(msb_router_dispose(r, &key, &gone, NULL), 0);
	cr_assert(gone);
	c = acquire_ok(r, "warm", (struct limits){.pids = 32});
	assert_cg("pids.max", "pids.max", "32");
	msb_sandbox_free(c);
	msb_router_free(r);
	assert_purged();
}

/* A call that ends in an error has no result to carry the flags: the error
 * says it, with its code unchanged. */
Test(limits, timeout_error_names_the_limit)
{
	msb_router *r = router_with(NULL);
	msb_sandbox *sb = acquire_ok(r, "to", (struct limits){.pids = 32});
	msb_exec_result res;
	msb_error *e = NULL;
	int rc = sh(sb,
		    "python3 -c 'import subprocess, time\n"
		    "subprocess.Popen([\"sh\", \"-c\", \"f(){ f|f& }; f\"],\n"
		    "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
		    "time.sleep(60)'",
		    3, &res, &e);
	cr_assert_eq(rc, MSB_E_TIMEOUT, "%s", msb_error_message(e));
	cr_assert(strstr(msb_error_message(e), "the pids limit refused a fork during this exec"),
		  "%s", msb_error_message(e));
	msb_error_free(e);
	assert_serves(sb);
	msb_sandbox_free(sb);
	msb_router_free(r);
	assert_purged();
}

/* As an ordinary user with no delegated cgroup, a limit asked for explicitly
 * cannot be enforced: the acquire fails with the reason, nothing is left. */
Test(limits, unprivileged_explicit_limit_fails_closed)
{
	cr_assert_eq(chown(root, NOBODY, NOBODY), 0);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) < 0)
			_exit(10);
		msb_ns_options o = MSB_NS_OPTIONS_INIT;
		o.state_root = root;
		msb_backend *b = NULL;
		msb_router *r = NULL;
		msb_error *e = NULL;
		msb_router_options ro = MSB_ROUTER_OPTIONS_INIT;
		ro.min_isolation = MSB_ISOLATION_CONTAINER;
		if (msb_ns_backend_new(&o, &b, &e) < 0 || msb_router_new(&b, 1, &ro, &r, &e) < 0)
			_exit(11);
		msb_key key = {"lim", tid("nobody"), "agent", NULL};
		msb_spec_builder *sbld = msb_spec_builder_new("lim");
		msb_spec_builder_set_pids_max(sbld, 32);
		msb_spec *s = NULL;
		msb_spec_build(sbld, &s, NULL);
		msb_sandbox *sb = NULL;
		int rc = msb_router_acquire(r, &key, s, NULL, &sb, &e);
		if (rc == 0) {
			msb_router_dispose(r, &key, NULL, NULL);
			_exit(12);
		}
		const char *m = msb_error_message(e);
		if (write(p[1], m, strlen(m)) < 0)
			_exit(13);
		_exit(0);
	}
	close(p[1]);
	char msg[2048];
	size_t len = 0;
	ssize_t n;
	while (len < sizeof(msg) - 1 && (n = read(p[0], msg + len, sizeof(msg) - 1 - len)) > 0)
		len += (size_t)n;
	msg[len] = '\0';
	close(p[0]);
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "as nobody, acquire with pids_max must fail (status %d): %s", status, msg);
	cr_assert(strstr(msg, "ns sandbox not created") && strstr(msg, "cgroup"),
		  "the refusal names the reason: %s", msg);
	assert_purged();
}

/* ---- the CLI ---------------------------------------------------------------- */

static int run_cli(const char *const *args, char *err, size_t size)
{
	const char *cli = getenv("MSB_CLI");
	cr_assert_not_null(cli, "MSB_CLI not set");
	const char *argv[32] = {"msb"};
	size_t n = 1;
	for (; args[n - 1] && n < 31; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	int p[2];
	/* Close-on-exec: only the CLI's stderr holds the pipe, never the
	 * pooled shims its refill leaves running (`msb run` keeps a pool),
	 * whose copy of a stray descriptor would keep the read below from EOF. */
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		dup2(p[1], 2);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		close(p[0]);
		execv(cli, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	size_t len = 0;
	ssize_t got;
	while (len < size - 1 && (got = read(p[0], err + len, size - 1 - len)) > 0)
		len += (size_t)got;
	err[len] = '\0';
	close(p[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Test(limits, cli_options_and_notes)
{
	char err[4096];
	const char *oom[] = {"run",
			     "--state-dir",
			     root,
			     "--min-isolation",
			     "container",
			     "--memory",
			     "256M",
			     "--pids",
			     "64",
			     "--cpu",
			     "500",
			     "--",
			     "python3",
			     "-c",
			     "bytearray(1 << 30)",
			     NULL};
	cr_assert_eq(run_cli(oom, err, sizeof(err)), 137, "%s", err);
	cr_assert(strstr(err, "msb: oom_killed: "), "a note on stderr: %s", err);

	const char *fill[] = {"run",
			      "--state-dir",
			      root,
			      "--min-isolation",
			      "container",
			      "--",
			      "sh",
			      "-c",
			      "dd if=/dev/zero of=/tmp/fill bs=1M 2>/dev/null",
			      NULL};
	cr_assert_eq(run_cli(fill, err, sizeof(err)), 1, "%s", err);
	cr_assert(strstr(err, "msb: no_space: "), "%s", err);
	cr_assert_null(strstr(err, "oom_killed"), "%s", err);

	const char *bad[] = {
		"run", "--min-isolation", "container", "--memory", "lots", "--", "true", NULL};
	cr_assert_eq(run_cli(bad, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "--memory wants a positive byte count"), "%s", err);
	const char *tiny[] = {"run",	   "--state-dir", root, "--min-isolation",
			      "container", "--pids",	  "1",	"--",
			      "true",	   NULL};
	cr_assert_neq(run_cli(tiny, err, sizeof(err)), 0, "%s", err);
	cr_assert(strstr(err, "resources.pids_max: 1 is below the minimum"), "%s", err);
	assert_purged();
}
