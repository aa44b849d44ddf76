/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ns_spawn: how long does a native sandbox take to become ready?
 *
 *   ns_spawn --shim PATH --init PATH [--runs N] [--idle-ms MS]
 *
 * For each configuration (no limits; memory+pids+cpu limits, which need a
 * cgroup) and each schedule (back to back; MS of idle between runs, DESIGN
 * §8: a v1 cgroup attach after ~100 ms of quiet waits for an RCU grace
 * period), it measures N runs of:
 *   lib   msb_ns__spawn() in this process, to the agent's exec
 *   shim  fork+exec msb-shim to its "ok", and to the init's first answer on
 *         agent.sock ("ping" -> "pong"); then SIGTERM to the shim's exit (the
 *         whole teardown: pid namespace, cgroups, socket, work tree, state dir)
 * and prints medians and p90s, plus the cgroup attach time inside the lib
 * spawn. Every sandbox is taken down after its run. Run as root (or as a
 * user with unprivileged user namespaces: the limit rows then fail closed
 * unless a delegated cgroup exists).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "backends/ns/boundary/boundary.h"
#include "util/fs.h"

struct opts {
	const char *shim;
	const char *init;
	int runs;
	int idle_ms;
};

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static double pct(int64_t *v, int n, double p)
{
	if (n == 0)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_i64);
	int i = (int)(p * (n - 1) + 0.5);
	return (double)v[i] / 1e6;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int ping(const char *dir, int64_t deadline_ns)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/agent.sock", dir);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (s >= 0)
			close(s);
		return -1;
	}
	struct timeval tv = {5, 0};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	char buf[16];
	int r = -1;
	if (write(s, "ping\n", 5) == 5 && read(s, buf, sizeof(buf)) >= 4 &&
	    strncmp(buf, "pong", 4) == 0)
		r = 0;
	close(s);
	(void)deadline_ns;
	return r;
}

static int write_config(const char *path, bool limits)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -1;
	if (limits)
		fputs("{\"image\":\"host\",\"memory_bytes\":268435456,\"pids_max\":256,"
		      "\"cpu_millis\":1000}\n",
		      f);
	else
		fputs("{\"image\":\"host\"}\n", f);
	return fclose(f);
}

/* One in-process spawn and teardown; *ready and *attach in ns. */
static int run_lib(const msb_ns_config *cfg, const char *dir, const char *init, int64_t *ready,
		   int64_t *attach)
{
	msb_error *e = NULL;
	int r = -1;
	_cleanup_free_ char *work = msb__asprintf("%s/work", dir);
	_cleanup_free_ char *sock = msb__asprintf("%s/agent.sock", dir);
	int64_t t0 = msb__now_ns();
	if (mkdir(dir, 0700) < 0 || mkdir(work, 0700) < 0)
		return -1;
	if (msb_ns__privileged() && chown(work, cfg->uid_base, cfg->gid_base) < 0)
		return -1;
	int wfd = open(work, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	msb_ns_cgroup *cg = NULL;
	msb_ns_sandbox *sb = NULL;
	const char *name = strrchr(dir, '/') + 1;
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 16) < 0)
		goto out;
	if (msb_ns__cgroup_plan(cfg, name, &cg, &e) < 0)
		goto out;
	msb_ns_spawn_opts o = MSB_NS_SPAWN_OPTS_INIT;
	o.state_dir = dir;
	o.name = name;
	o.agent_path = init;
	o.listen_fd = lfd;
	o.work_path = work;
	o.work_fd = wfd;
	o.cgroup = cg;
	if (msb_ns__spawn(cfg, &o, &sb, &e) < 0)
		goto out;
	*ready = msb__now_ns() - t0;
	*attach = sb->timing.attach_ns;
	r = 0;
out:
	if (e)
		fprintf(stderr, "lib spawn: %s\n", msb_error_message(e));
	msb_error_free(e);
	msb_ns__sandbox_free(sb);
	e = NULL;
	if (cg && msb_ns__cgroup_destroy(cg, &e) < 0) {
		fprintf(stderr, "cgroup: %s\n", msb_error_message(e));
		msb_error_free(e);
	}
	msb_ns__cgroup_free(cg);
	close(lfd);
	close(wfd);
	unlink(sock);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		msb__rm_rf_at(dfd, "work");
		close(dfd);
	}
	rmdir(dir);
	return r;
}

/* One msb-shim start, ping, SIGTERM, wait. */
static int run_shim(const struct opts *op, const char *cfgpath, const char *dir, int64_t *ok,
		    int64_t *pong, int64_t *down)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	int64_t t0 = msb__now_ns();
	pid_t pid = fork();
	if (pid == 0) {
		dup2(p[1], 3);
		execl(op->shim, "msb-shim", "--state", dir, "--agent", op->init, "--config",
		      cfgpath, "--ready-fd", "3", "--remove-state-dir", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	char buf[512];
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	int r = -1;
	if (n >= 3 && strncmp(buf, "ok\n", 3) == 0) {
		*ok = msb__now_ns() - t0;
		if (ping(dir, 0) == 0) {
			*pong = msb__now_ns() - t0;
			r = 0;
		}
	} else {
		buf[n > 0 ? n : 0] = '\0';
		fprintf(stderr, "shim: %s", buf);
	}
	if (pid > 0) {
		int64_t t1 = msb__now_ns();
		kill(pid, SIGTERM);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		*down = msb__now_ns() - t1;
	}
	return r;
}

static void series(const struct opts *op, bool limits, int idle_ms)
{
	msb_ns_config cfg;
	msb_error *e = NULL;
	char cfgpath[] = "/tmp/msb-bench-cfg-XXXXXX";
	int cfd = mkstemp(cfgpath);
	if (cfd < 0)
		return;
	close(cfd);
	write_config(cfgpath, limits);
	msb_ns__config_init(&cfg);
	if (limits) {
		cfg.memory_max = 256ull << 20;
		cfg.pids_max = 256;
		cfg.cpu_quota_us = MSB_NS_CPU_PERIOD_US;
	}
	int n = op->runs;
	int64_t *lib = calloc((size_t)n, sizeof(int64_t));
	int64_t *att = calloc((size_t)n, sizeof(int64_t));
	int64_t *ok = calloc((size_t)n, sizeof(int64_t));
	int64_t *pong = calloc((size_t)n, sizeof(int64_t));
	int64_t *down = calloc((size_t)n, sizeof(int64_t));
	int nl = 0, ns = 0;
	for (int i = 0; i < n; i++) {
		char dir[64];
		snprintf(dir, sizeof(dir), "/tmp/msb-bench-%d-%d", (int)getpid(), i);
		if (idle_ms)
			sleep_ms(idle_ms);
		if (run_lib(&cfg, dir, op->init, &lib[nl], &att[nl]) == 0)
			nl++;
	}
	for (int i = 0; i < n; i++) {
		char dir[64];
		snprintf(dir, sizeof(dir), "/tmp/msb-bench-%d-s%d", (int)getpid(), i);
		if (idle_ms)
			sleep_ms(idle_ms);
		if (run_shim(op, cfgpath, dir, &ok[ns], &pong[ns], &down[ns]) == 0)
			ns++;
	}
	const char *label = limits ? "limits (memory+pids+cpu)" : "no limits";
	const char *sched = idle_ms ? "after idle" : "back to back";
	printf("%s, %s:\n", label, sched);
	printf("  lib  msb_ns__spawn            p50 %6.2f ms  p90 %6.2f  (%d/%d ok)\n",
	       pct(lib, nl, .5), pct(lib, nl, .9), nl, n);
	printf("       of which cgroup attach   p50 %6.2f ms  p90 %6.2f\n", pct(att, nl, .5),
	       pct(att, nl, .9));
	printf("  shim exec to \"ok\"            p50 %6.2f ms  p90 %6.2f  (%d/%d ok)\n",
	       pct(ok, ns, .5), pct(ok, ns, .9), ns, n);
	printf("       exec to first answer     p50 %6.2f ms  p90 %6.2f\n", pct(pong, ns, .5),
	       pct(pong, ns, .9));
	printf("       SIGTERM to shim exit     p50 %6.2f ms  p90 %6.2f\n", pct(down, ns, .5),
	       pct(down, ns, .9));
	fflush(stdout);
	free(lib);
	free(att);
	free(ok);
	free(pong);
	free(down);
	msb_ns__config_clear(&cfg);
	msb_error_free(e);
	unlink(cfgpath);
}

int main(int argc, char **argv)
{
	struct opts op = {NULL, NULL, 100, 100};
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--shim") == 0)
			op.shim = argv[i + 1];
		else if (strcmp(argv[i], "--init") == 0)
			op.init = argv[i + 1];
		else if (strcmp(argv[i], "--runs") == 0)
			op.runs = (int)strtol(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--idle-ms") == 0)
			op.idle_ms = (int)strtol(argv[i + 1], NULL, 10);
	}
	if (!op.shim || !op.init || op.runs < 1) {
		fprintf(stderr,
			"usage: ns_spawn --shim PATH --init PATH [--runs N] [--idle-ms MS]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	printf("ns_spawn: %d runs each; idle schedule sleeps %d ms before each run\n", op.runs,
	       op.idle_ms);
	series(&op, false, 0);
	series(&op, false, op.idle_ms);
	series(&op, true, 0);
	series(&op, true, op.idle_ms);
	return 0;
}
