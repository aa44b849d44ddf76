/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb_bench: the `ns` backend's speed and footprint, measured through the
 * public API (msb/msb.h, msb/ns.h) in one process, one JSON line per case.
 *
 *   msb_bench [-n N] [--many M] [--idle-ms MS] [--state-dir DIR] [--only LIST]
 *             [--cpu-accounting]
 *
 * Cases (N iterations each, default 100; times in ms, p50/p90/p99 by nearest
 * rank):
 *   fork_exec_true       fork+execv+waitpid of /bin/true here (the baseline)
 *   cold_acquire_b2b     acquire of a NEW key, back to back; dispose untimed
 *   cold_acquire_idle    the same after MS (default 100) of idle before each
 *   warm_exec            exec /bin/true in one warm sandbox, same handle
 *   warm_acquire_exec    acquire of the existing sandbox (a new handle) +
 *                        exec /bin/true + release: what `msb exec` does
 *   run_b2b              call-scoped acquire + exec /bin/true + dispose
 *   run_idle             the same after MS of idle before each
 *   steps_b2b, steps_idle a call-scoped run with each step timed apart
 *   pool_acquire_b2b     acquire of a new key served from the warm pool
 *                        (docs/pool.md): batches of up to 20 pooled
 *                        sandboxes filled untimed, then claimed back to back
 *   pool_acquire_idle    the same, one at a time after MS of idle
 *   pool_run_b2b         call-scoped acquire (from the pool) + exec /bin/true +
 *                        dispose, back to back within a batch
 *   pool_run_idle        the same after MS of idle before each
 *   dispose              dispose of a fresh idle sandbox (acquire untimed)
 *   idle_memory          one idle sandbox: Pss, Rss and USS of shim + agent
 *   many                 M (default 200) idle sandboxes at once: how many
 *                        came up, their memory, an exec in each, dispose all
 *
 * Each timed sample is followed by one untimed fork+exec of /bin/true, whose
 * p50 is reported beside the case's (fork_exec_p50_ms, x_fork_exec): the
 * baseline under the same load. With --cpu-accounting (the program runs in
 * a cgroup of its own, as bench/run arranges) the CPU time that all the
 * processes of a sample used is reported too (cpu_p50_ms).
 *
 * --only takes a comma-separated list of case names (`cold` selects both
 * cold cases, `run` both run cases). The helpers are taken from $MSB_SHIM
 * and $MSB_AGENT, else from beside this binary in a build tree
 * (../shim/msb-shim, ../agent/msb-agent). State goes to a fresh directory
 * under /tmp unless --state-dir is given; every sandbox this program made is
 * disposed before it exits, and the directory it created is removed.
 * Run as root (cgroups) or as a user with unprivileged user namespaces.
 * A benchmark, never a test: run it by hand or from bench/run.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msb/msb.h>
#include <msb/ns.h>

#include "msb_bench.h"

static const char *const true_argv[] = {"/bin/true", NULL};

double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * CPU time of this process's cpuacct cgroup (v1) or cgroup (v2), in ms: the
 * CPU every process of an operation used (this one, the shim, the agent and
 * their children stay in it unless they move themselves), which contention
 * on a shared machine inflates far less than wall time. Only with
 * --cpu-accounting, which says that this program runs in a cgroup of its own
 * (bench/run makes one); -1 otherwise.
 */
static char cpuacct_file[PATH_MAX];
static bool cpuacct_v2;

static void cpuacct_setup(void)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024], v2[PATH_MAX] = "";
	cpuacct_file[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		char *c1 = strchr(line, ':');
		char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		const char *ctrl = c1 + 1, *path = c2 + 1;
		if (strcmp(path, "/") == 0)
			continue;
		if (strstr(ctrl, "cpuacct")) {
			static const char *const dirs[] = {"/sys/fs/cgroup/cpuacct",
							   "/sys/fs/cgroup/cpu,cpuacct"};
			for (size_t i = 0; i < 2; i++) {
				snprintf(cpuacct_file, sizeof(cpuacct_file), "%s%s/cpuacct.usage",
					 dirs[i], path);
				if (access(cpuacct_file, R_OK) == 0) {
					fclose(f);
					return;
				}
			}
			cpuacct_file[0] = '\0';
		} else if (ctrl[0] == '\0' && strncmp(line, "0", 2) == 0) {
			snprintf(v2, sizeof(v2), "/sys/fs/cgroup%s/cpu.stat", path);
		}
	}
	fclose(f);
	if (v2[0] && access(v2, R_OK) == 0) {
		snprintf(cpuacct_file, sizeof(cpuacct_file), "%s", v2);
		cpuacct_v2 = true;
	}
}

static double cpu_now_ms(void)
{
	if (!cpuacct_file[0])
		return -1;
	FILE *f = fopen(cpuacct_file, "re");
	if (!f)
		return -1;
	unsigned long long v = 0;
	int got = 0;
	if (cpuacct_v2) {
		char line[128];
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "usage_usec %llu", &v) == 1) {
				got = 1;
				v *= 1000;
				break;
			}
	} else {
		got = fscanf(f, "%llu", &v) == 1;
	}
	fclose(f);
	return got ? (double)v / 1e6 : -1;
}

int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Nearest rank: the smallest value with at least q of the samples at or
 * below it. v must be sorted, n > 0. */
double pct(const double *v, int n, double q)
{
	int k = (int)(q * n + 0.999999);
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

/* A JSON string literal (RFC 8259 escapes) on stdout. */
void json_str(const char *s)
{
	putchar('"');
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", stdout);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

/* One fork+execv+waitpid of /bin/true, in ms; < 0 on failure. */
static double fork_exec_ms(void)
{
	double t0 = now_ms();
	pid_t p = fork();
	if (p == 0) {
		execv(true_argv[0], (char *const *)true_argv);
		_exit(127);
	}
	int st = 0;
	if (p < 0 || waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return -1;
	return now_ms() - t0;
}

/*
 * base (may be NULL) holds one fork+exec sample taken right after each
 * sample of the case, so that the ratio compares the two under the same
 * load: on a shared machine the absolute numbers move with the neighbours.
 */
static void report_times(const char *name, double *v, int ok, int n, double *base, int nb,
			 double *cpu, int nc, const char *note)
{
	printf("{\"case\":");
	json_str(name);
	printf(",\"n\":%d,\"ok\":%d", n, ok);
	if (ok > 0) {
		qsort(v, (size_t)ok, sizeof(*v), cmp_double);
		double sum = 0;
		for (int i = 0; i < ok; i++)
			sum += v[i];
		printf(",\"p50_ms\":%.3f,\"p90_ms\":%.3f,\"p99_ms\":%.3f,\"min_ms\":%.3f,"
		       "\"max_ms\":%.3f,\"mean_ms\":%.3f",
		       pct(v, ok, .5), pct(v, ok, .9), pct(v, ok, .99), v[0], v[ok - 1], sum / ok);
		if (base && nb > 0) {
			qsort(base, (size_t)nb, sizeof(*base), cmp_double);
			printf(",\"fork_exec_p50_ms\":%.3f,\"x_fork_exec\":%.2f", pct(base, nb, .5),
			       pct(v, ok, .5) / pct(base, nb, .5));
		}
		if (cpu && nc > 0) {
			qsort(cpu, (size_t)nc, sizeof(*cpu), cmp_double);
			printf(",\"cpu_p50_ms\":%.3f,\"cpu_p90_ms\":%.3f", pct(cpu, nc, .5),
			       pct(cpu, nc, .9));
		}
	}
	if (note) {
		printf(",\"note\":");
		json_str(note);
	}
	printf("}\n");
	fflush(stdout);
}

void report_error(struct bench *b, const char *name, const char *what, msb_error *err)
{
	b->failures++;
	printf("{\"case\":");
	json_str(name);
	printf(",\"error\":");
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s: %s", what, err ? msb_error_message(err) : "failed");
	json_str(buf);
	printf("}\n");
	fflush(stdout);
}

static bool selected(const struct bench *b, const char *name)
{
	if (!b->only)
		return true;
	size_t len = strlen(b->only);
	const char *p = b->only;
	while (p < b->only + len) {
		const char *comma = strchr(p, ',');
		size_t w = comma ? (size_t)(comma - p) : strlen(p);
		if (w > 0 && strncmp(name, p, w) == 0 && (name[w] == '\0' || name[w] == '_'))
			return true;
		p += w + 1;
	}
	return false;
}

/* ---- set-up --------------------------------------------------------------- */

static void locate_helper(const char *env, const char *rel, char *out, size_t size)
{
	const char *e = getenv(env);
	out[0] = '\0';
	if (e && *e) {
		snprintf(out, size, "%s", e);
		return;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return;
	*slash = '\0';
	int w = snprintf(out, size, "%.*s/%s", PATH_MAX - 64, exe, rel);
	if (w < 0 || (size_t)w >= size || access(out, X_OK) != 0)
		out[0] = '\0';
}

static int make_spec(msb_isolation_scope scope, msb_spec **out, msb_error **err)
{
	msb_spec_builder *sb = msb_spec_builder_new(KIND);
	if (!sb)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	msb_spec_builder_set_requires(sb, MSB_CAP_EXEC);
	msb_spec_builder_set_isolation_scope(sb, scope);
	int r = msb_spec_build(sb, out, err);
	msb_spec_builder_free(sb);
	return r;
}

static int setup(struct bench *b, msb_error **err)
{
	if (!b->state_root[0]) {
		char tmpl[] = "/tmp/msbb-state-XXXXXX";
		if (!mkdtemp(tmpl))
			return msb_error_set(err, MSB_E_RUNTIME, "mkdtemp: %s", strerror(errno));
		snprintf(b->state_root, sizeof(b->state_root), "%s", tmpl);
		b->made_root = true;
	}
	locate_helper("MSB_SHIM", "../shim/msb-shim", b->shim, sizeof(b->shim));
	locate_helper("MSB_AGENT", "../agent/msb-agent", b->agent, sizeof(b->agent));
	msb_ns_options no = MSB_NS_OPTIONS_INIT;
	no.state_root = b->state_root;
	no.shim_path = b->shim[0] ? b->shim : NULL;
	no.agent_path = b->agent[0] ? b->agent : NULL;
	msb_backend *be = NULL;
	int r = msb_ns_backend_new(&no, &be, err);
	if (r < 0)
		return r;
	msb_router_options ro = MSB_ROUTER_OPTIONS_INIT;
	ro.min_isolation = MSB_ISOLATION_CONTAINER;
	b->backend = msb_backend_ref(be);
	r = msb_router_new(&be, 1, &ro, &b->router, err);
	msb_backend_unref(be);
	if (r < 0)
		return r;
	if ((r = make_spec(MSB_SCOPE_CONVERSATION, &b->conv_spec, err)) < 0)
		return r;
	return make_spec(MSB_SCOPE_CALL, &b->call_spec, err);
}

void new_key(struct bench *b, const char *tag, bool call, struct key_buf *k)
{
	unsigned long s = b->seq++;
	snprintf(k->thread, sizeof(k->thread), "%s-%d-%lu", tag, (int)getpid(), s);
	snprintf(k->call, sizeof(k->call), "call-%lu", s);
	k->key.scope = SCOPE;
	k->key.thread_id = k->thread;
	k->key.agent_dir = AGENT_DIR;
	k->key.call_id = call ? k->call : NULL;
}

int acquire(struct bench *b, struct key_buf *k, msb_sandbox **sb, msb_error **err)
{
	msb_acquire_options ao = MSB_ACQUIRE_OPTIONS_INIT;
	ao.call = k->key.call_id;
	return msb_router_acquire(b->router, &k->key, k->key.call_id ? b->call_spec : b->conv_spec,
				  &ao, sb, err);
}

int dispose(struct bench *b, struct key_buf *k, msb_error **err)
{
	bool all = false;
	int r = msb_router_dispose(b->router, &k->key, &all, err);
	if (r < 0)
		return r;
	if (!all)
		return msb_error_set(err, MSB_E_RUNTIME, "the sandbox was not disposed");
	return 0;
}

int exec_true(msb_sandbox *sb, msb_error **err)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = true_argv;
	req.timeout = 30;
	msb_exec_result res = {0};
	int r = msb_sandbox_exec(sb, &req, &res, err);
	if (r < 0)
		return r;
	int code = res.exit_code;
	msb_exec_result_clear(&res);
	if (code != 0)
		return msb_error_set(err, MSB_E_RUNTIME, "/bin/true exited with %d", code);
	return 0;
}

/* ---- timed cases ---------------------------------------------------------- */

static void case_fork_exec(struct bench *b)
{
	double *v = calloc((size_t)b->n, sizeof(*v));
	double *cpu = calloc((size_t)b->n, sizeof(*cpu));
	int ok = 0, nc = 0;
	if (!v || !cpu)
		goto out;
	for (int i = -5; i < b->n; i++) {
		double c0 = cpu_now_ms();
		double ms = fork_exec_ms();
		double c1 = cpu_now_ms();
		if (ms < 0 || i < 0)
			continue;
		v[ok++] = ms;
		if (c0 >= 0 && c1 >= c0)
			cpu[nc++] = c1 - c0;
	}
	report_times("fork_exec_true", v, ok, b->n, NULL, 0, cpu, nc,
		     "fork+execv+waitpid of /bin/true");
out:
	free(v);
	free(cpu);
}

/* A case's samples, their CPU time, and the interleaved fork+exec baseline. */
struct samples {
	double *v;
	double *base;
	double *cpu;
	int ok;
	int nb;
	int nc;
};

static int samples_init(struct samples *sm, int n)
{
	sm->v = calloc((size_t)n, sizeof(double));
	sm->base = calloc((size_t)n, sizeof(double));
	sm->cpu = calloc((size_t)n, sizeof(double));
	sm->ok = sm->nb = sm->nc = 0;
	if (sm->v && sm->base && sm->cpu)
		return 0;
	free(sm->v);
	free(sm->base);
	free(sm->cpu);
	return -1;
}

static void samples_free(struct samples *sm)
{
	free(sm->v);
	free(sm->base);
	free(sm->cpu);
	sm->v = sm->base = sm->cpu = NULL;
}

/* A timed region: wall clock and cgroup CPU time at its start. */
struct mark {
	double t;
	double cpu;
};

static struct mark mark_start(void)
{
	struct mark m = {.cpu = cpu_now_ms()};
	m.t = now_ms();
	return m;
}

static struct mark mark_end(void)
{
	struct mark m = {.t = now_ms()};
	m.cpu = cpu_now_ms();
	return m;
}

static void samples_add(struct samples *sm, struct mark m0, struct mark m1)
{
	sm->v[sm->ok++] = m1.t - m0.t;
	if (m0.cpu >= 0 && m1.cpu >= m0.cpu)
		sm->cpu[sm->nc++] = m1.cpu - m0.cpu;
	double f = fork_exec_ms();
	if (f >= 0)
		sm->base[sm->nb++] = f;
}

static void samples_report(struct samples *sm, const char *name, int n, const char *note)
{
	report_times(name, sm->v, sm->ok, n, sm->base, sm->nb, sm->cpu, sm->nc, note);
	samples_free(sm);
}

static void case_cold(struct bench *b, const char *name, int idle_ms)
{
	struct samples sm;
	if (samples_init(&sm, b->n) < 0)
		return;
	for (int i = 0; i < b->n; i++) {
		struct key_buf k;
		new_key(b, name, false, &k);
		msb_sandbox *sb = NULL;
		msb_error *err = NULL;
		if (idle_ms)
			sleep_ms(idle_ms);
		struct mark m0 = mark_start();
		int r = acquire(b, &k, &sb, &err);
		struct mark m1 = mark_end();
		if (r < 0) {
			report_error(b, name, "acquire", err);
			msb_error_free(err);
			dispose(b, &k, NULL);
			break;
		}
		msb_sandbox_free(sb);
		if (dispose(b, &k, &err) < 0) {
			report_error(b, name, "dispose", err);
			msb_error_free(err);
		}
		samples_add(&sm, m0, m1);
	}
	samples_report(&sm, name, b->n,
		       idle_ms ? "acquire of a new key after idle; dispose untimed"
			       : "acquire of a new key, back to back; dispose untimed");
}

static void case_warm_exec(struct bench *b)
{
	struct samples sv, sw;
	struct key_buf k;
	new_key(b, "warm", false, &k);
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	bool have_v = samples_init(&sv, b->n) == 0, have_w = samples_init(&sw, b->n) == 0;
	if (!have_v || !have_w)
		goto out;
	if (acquire(b, &k, &sb, &err) < 0) {
		report_error(b, "warm_exec", "acquire", err);
		goto out;
	}
	for (int i = -10; i < b->n; i++) {
		struct mark m0 = mark_start();
		if (exec_true(sb, &err) < 0) {
			report_error(b, "warm_exec", "exec", err);
			goto out;
		}
		struct mark m1 = mark_end();
		if (i >= 0)
			samples_add(&sv, m0, m1);
	}
	samples_report(&sv, "warm_exec", b->n, "exec /bin/true in a warm sandbox, same handle");
	have_v = false;
	if (!selected(b, "warm_acquire_exec"))
		goto out;
	for (int i = 0; i < b->n; i++) {
		msb_sandbox *h = NULL;
		struct mark m0 = mark_start();
		if (acquire(b, &k, &h, &err) < 0 || exec_true(h, &err) < 0) {
			report_error(b, "warm_acquire_exec", "acquire+exec", err);
			msb_sandbox_free(h);
			goto out;
		}
		msb_sandbox_free(h);
		struct mark m1 = mark_end();
		samples_add(&sw, m0, m1);
	}
	samples_report(
		&sw, "warm_acquire_exec", b->n,
		"acquire of the live sandbox (new handle, new connection) + exec /bin/true + "
		"release");
	have_w = false;
out:
	msb_error_free(err);
	err = NULL;
	msb_sandbox_free(sb);
	if (sb && dispose(b, &k, &err) < 0) {
		report_error(b, "warm_exec", "dispose", err);
		msb_error_free(err);
	}
	if (have_v)
		samples_free(&sv);
	if (have_w)
		samples_free(&sw);
}

static void case_run(struct bench *b, const char *name, int idle_ms)
{
	struct samples sm;
	if (samples_init(&sm, b->n) < 0)
		return;
	for (int i = 0; i < b->n; i++) {
		struct key_buf k;
		new_key(b, name, true, &k);
		msb_sandbox *sb = NULL;
		msb_error *err = NULL;
		if (idle_ms)
			sleep_ms(idle_ms);
		struct mark m0 = mark_start();
		int r = acquire(b, &k, &sb, &err);
		if (r == 0)
			r = exec_true(sb, &err);
		msb_sandbox_free(sb);
		int d = dispose(b, &k, r < 0 ? NULL : &err);
		struct mark m1 = mark_end();
		if (r < 0 || d < 0) {
			report_error(b, name, "acquire+exec+dispose", err);
			msb_error_free(err);
			break;
		}
		samples_add(&sm, m0, m1);
	}
	samples_report(&sm, name, b->n,
		       idle_ms ? "call-scoped acquire + exec /bin/true + dispose, after idle"
			       : "call-scoped acquire + exec /bin/true + dispose, back to back");
}

/*
 * A call-scoped run split into its steps, each timed on its own within the
 * same sample: where a run's time goes beyond acquire + exec + dispose
 * measured apart (issue 17). One JSON line per step and one for the whole
 * sample (`total`, the steps back to back).
 */
#define RUN_STEPS 5
static void case_run_steps(struct bench *b, const char *name, int idle_ms)
{
	static const char *const step[RUN_STEPS] = {"acquire", "exec", "release", "dispose",
						    "total"};
	double *v[RUN_STEPS] = {0};
	int ok = 0;
	for (int s = 0; s < RUN_STEPS; s++)
		if (!(v[s] = calloc((size_t)b->n, sizeof(double))))
			goto out;
	for (int i = 0; i < b->n; i++) {
		struct key_buf k;
		new_key(b, name, true, &k);
		msb_sandbox *sb = NULL;
		msb_error *err = NULL;
		if (idle_ms)
			sleep_ms(idle_ms);
		double t[5];
		t[0] = now_ms();
		int r = acquire(b, &k, &sb, &err);
		t[1] = now_ms();
		if (r == 0)
			r = exec_true(sb, &err);
		t[2] = now_ms();
		msb_sandbox_free(sb);
		t[3] = now_ms();
		int d = dispose(b, &k, r < 0 ? NULL : &err);
		t[4] = now_ms();
		if (r < 0 || d < 0) {
			report_error(b, name, "acquire+exec+dispose", err);
			msb_error_free(err);
			break;
		}
		for (int s = 0; s < 4; s++)
			v[s][ok] = t[s + 1] - t[s];
		v[4][ok] = t[4] - t[0];
		ok++;
		fork_exec_ms(); /* the other cases' rhythm */
	}
	for (int s = 0; s < RUN_STEPS; s++) {
		char full[96];
		snprintf(full, sizeof(full), "%s.%s", name, step[s]);
		report_times(full, v[s], ok, b->n, NULL, 0, NULL, 0,
			     s == 4 ? "the whole sample: the sum of the steps above"
				    : "one step of a call-scoped run, timed within it");
	}
out:
	for (int s = 0; s < RUN_STEPS; s++)
		free(v[s]);
}

/*
 * The warm pool (issue 17): what an acquire costs when a pooled sandbox of
 * its template is ready. The pool is filled untimed (msb_ns_pool_fill, which
 * waits for the shims), then left 50 ms so the agents finish starting (their
 * workloads' pid namespace), then claimed: back to back within a batch of up
 * to 20, or one by one after the idle time. `run` adds exec + dispose.
 */
#define POOL_BATCH 20
static void case_pool(struct bench *b, const char *name, bool run, int idle_ms)
{
	struct samples sm;
	if (samples_init(&sm, b->n) < 0)
		return;
	/* run: each step of a sample too (acquire, exec, release, dispose) */
	double *steps[4] = {0};
	int nsteps = 0;
	for (int i = 0; run && i < 4; i++)
		if (!(steps[i] = calloc((size_t)b->n, sizeof(double))))
			run = false;
	int done = 0;
	while (done < b->n) {
		unsigned batch =
			idle_ms ? 1
				: (unsigned)(b->n - done < POOL_BATCH ? b->n - done : POOL_BATCH);
		msb_error *err = NULL;
		unsigned made = 0;
		if (msb_ns_pool_fill(b->backend, run ? b->call_spec : b->conv_spec, batch, &made,
				     &err) < 0 ||
		    made != batch) {
			report_error(b, name, "pool fill", err);
			msb_error_free(err);
			break;
		}
		sleep_ms(50);
		bool failed = false;
		for (unsigned i = 0; i < batch; i++, done++) {
			struct key_buf k;
			new_key(b, name, run, &k);
			msb_sandbox *sb = NULL;
			if (idle_ms)
				sleep_ms(idle_ms);
			double t[5];
			struct mark m0 = mark_start();
			t[0] = m0.t;
			int r = acquire(b, &k, &sb, &err);
			t[1] = now_ms();
			if (r == 0 && run)
				r = exec_true(sb, &err);
			t[2] = now_ms();
			if (run)
				msb_sandbox_free(sb);
			t[3] = now_ms();
			int d = run ? dispose(b, &k, r < 0 ? NULL : &err) : 0;
			struct mark m1 = mark_end();
			t[4] = m1.t;
			if (run && r == 0 && d == 0) {
				for (int s = 0; s < 4; s++)
					steps[s][nsteps] = t[s + 1] - t[s];
				nsteps++;
			}
			if (!run) {
				msb_sandbox_free(sb);
				dispose(b, &k, NULL);
			}
			if (r < 0 || d < 0) {
				report_error(b, name, run ? "acquire+exec+dispose" : "acquire",
					     err);
				msb_error_free(err);
				failed = true;
				break;
			}
			samples_add(&sm, m0, m1);
		}
		if (failed)
			break;
	}
	msb_ns_pool_drain(b->backend, NULL, NULL, NULL);
	static const char *const step[4] = {"acquire", "exec", "release", "dispose"};
	for (int s = 0; s < 4 && steps[s]; s++) {
		char full[96];
		snprintf(full, sizeof(full), "%s.%s", name, step[s]);
		report_times(full, steps[s], nsteps, b->n, NULL, 0, NULL, 0,
			     "one step of the run above, timed within it");
		free(steps[s]);
	}
	samples_report(&sm, name, b->n,
		       run ? (idle_ms ? "call-scoped acquire from the warm pool + exec /bin/true + "
					"dispose, after idle"
				      : "call-scoped acquire from the warm pool + exec /bin/true + "
					"dispose, back to back")
		       : idle_ms
			       ? "acquire of a new key from the warm pool, after idle; fill and "
				 "dispose untimed"
			       : "acquire of a new key from the warm pool, back to back; fill and "
				 "dispose untimed");
}

static void case_dispose(struct bench *b)
{
	struct samples sm;
	if (samples_init(&sm, b->n) < 0)
		return;
	for (int i = 0; i < b->n; i++) {
		struct key_buf k;
		new_key(b, "dispose", false, &k);
		msb_sandbox *sb = NULL;
		msb_error *err = NULL;
		if (acquire(b, &k, &sb, &err) < 0) {
			report_error(b, "dispose", "acquire", err);
			msb_error_free(err);
			dispose(b, &k, NULL);
			break;
		}
		msb_sandbox_free(sb);
		struct mark m0 = mark_start();
		int r = dispose(b, &k, &err);
		struct mark m1 = mark_end();
		if (r < 0) {
			report_error(b, "dispose", "dispose", err);
			msb_error_free(err);
			break;
		}
		samples_add(&sm, m0, m1);
	}
	samples_report(&sm, "dispose", b->n,
		       "dispose of an idle sandbox (shim, agent, cgroups, state dir gone)");
}

/* ---- tear-down ------------------------------------------------------------ */

/* Dispose whatever is still recorded under the state root (a failed case),
 * then remove the root if this program made it. Returns how many remain. */
static int cleanup(struct bench *b)
{
	if (b->backend)
		msb_ns_pool_drain(b->backend, NULL, NULL, NULL);
	msb_ns_options no = MSB_NS_OPTIONS_INIT;
	no.state_root = b->state_root;
	msb_ns_entry *e = NULL;
	size_t n = 0;
	msb_error *err = NULL;
	if (b->router && msb_ns_list(&no, &e, &n, &err) == 0) {
		for (size_t i = 0; i < n; i++) {
			msb_key key = {e[i].scope, e[i].thread_id, e[i].agent_dir, e[i].call_id};
			if (e[i].scope && strcmp(e[i].scope, SCOPE) == 0)
				msb_router_dispose(b->router, &key, NULL, NULL);
		}
		msb_ns_entries_free(e, n);
		e = NULL;
		n = 0;
	}
	msb_error_free(err);
	err = NULL;
	int left = 0;
	if (msb_ns_list(&no, &e, &n, &err) == 0) {
		left = (int)n;
		msb_ns_entries_free(e, n);
	}
	msb_error_free(err);
	if (b->made_root && left == 0) {
		char ns[PATH_MAX + 8];
		snprintf(ns, sizeof(ns), "%s/ns", b->state_root);
		rmdir(ns);
		rmdir(b->state_root);
	}
	return left;
}

static void usage(FILE *f)
{
	fputs("usage: msb_bench [-n N] [--many M] [--idle-ms MS] [--state-dir DIR] "
	      "[--only CASE,...] [--cpu-accounting]\n",
	      f);
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end = NULL;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || !end || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

int main(int argc, char **argv)
{
	struct bench b = {.n = 100, .many = 200, .idle_ms = 100};
	bool cpu_accounting = false;
	static const struct option opts[] = {
		{"many", required_argument, NULL, 'm'},
		{"idle-ms", required_argument, NULL, 'i'},
		{"state-dir", required_argument, NULL, 's'},
		{"only", required_argument, NULL, 'o'},
		{"cpu-accounting", no_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;
	while ((c = getopt_long(argc, argv, "n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (parse_int(optarg, 1, MAX_N, &b.n) < 0)
				goto bad;
			break;
		case 'm':
			if (parse_int(optarg, 0, MAX_MANY, &b.many) < 0)
				goto bad;
			break;
		case 'i':
			if (parse_int(optarg, 0, 10000, &b.idle_ms) < 0)
				goto bad;
			break;
		case 's':
			snprintf(b.state_root, sizeof(b.state_root), "%s", optarg);
			break;
		case 'o':
			b.only = optarg;
			break;
		case 'c':
			cpu_accounting = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (optind != argc)
		goto bad;

	msb_error *err = NULL;
	if (cpu_accounting)
		cpuacct_setup();
	if (setup(&b, &err) < 0) {
		report_error(&b, "setup", "setup", err);
		msb_error_free(err);
		cleanup(&b);
		return 1;
	}
	printf("{\"case\":\"meta\",\"n\":%d,\"many\":%d,\"idle_ms\":%d,\"msb_version\":", b.n,
	       b.many, b.idle_ms);
	json_str(msb_version());
	printf(",\"state_root\":");
	json_str(b.state_root);
	printf(",\"shim\":");
	json_str(b.shim[0] ? b.shim : getenv("MSB_SHIM"));
	printf(",\"agent\":");
	json_str(b.agent[0] ? b.agent : getenv("MSB_AGENT"));
	printf(",\"cpu_accounting\":");
	json_str(cpuacct_file[0] ? cpuacct_file : "none (not in a cgroup of its own)");
	printf("}\n");
	fflush(stdout);

	if (selected(&b, "fork_exec_true"))
		case_fork_exec(&b);
	if (selected(&b, "cold_acquire_b2b"))
		case_cold(&b, "cold_acquire_b2b", 0);
	if (selected(&b, "cold_acquire_idle") && b.idle_ms > 0)
		case_cold(&b, "cold_acquire_idle", b.idle_ms);
	if (selected(&b, "warm_exec") || selected(&b, "warm_acquire_exec"))
		case_warm_exec(&b);
	if (selected(&b, "run_b2b"))
		case_run(&b, "run_b2b", 0);
	if (selected(&b, "run_idle") && b.idle_ms > 0)
		case_run(&b, "run_idle", b.idle_ms);
	if (selected(&b, "steps_b2b"))
		case_run_steps(&b, "steps_b2b", 0);
	if (selected(&b, "steps_idle") && b.idle_ms > 0)
		case_run_steps(&b, "steps_idle", b.idle_ms);
	if (selected(&b, "pool_acquire_b2b"))
		case_pool(&b, "pool_acquire_b2b", false, 0);
	if (selected(&b, "pool_acquire_idle") && b.idle_ms > 0)
		case_pool(&b, "pool_acquire_idle", false, b.idle_ms);
	if (selected(&b, "pool_run_b2b"))
		case_pool(&b, "pool_run_b2b", true, 0);
	if (selected(&b, "pool_run_idle") && b.idle_ms > 0)
		case_pool(&b, "pool_run_idle", true, b.idle_ms);
	if (selected(&b, "dispose"))
		case_dispose(&b);
	if (selected(&b, "idle_memory"))
		case_idle_memory(&b);
	if (selected(&b, "many") && b.many > 0)
		case_many(&b);

	int left = cleanup(&b);
	if (left) {
		printf("{\"case\":\"cleanup\",\"error\":\"%d sandbox(es) remain under the state "
		       "root\"}\n",
		       left);
		b.failures++;
	}
	msb_spec_unref(b.conv_spec);
	msb_spec_unref(b.call_spec);
	msb_backend_unref(b.backend);
	msb_router_free(b.router);
	return b.failures ? 1 : 0;
bad:
	usage(stderr);
	return 2;
}
