/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exec round trip through msb-agent, side by side with a bare fork+exec of
 * the same program, in one run. The agent runs as an ordinary child process
 * (no namespaces): this measures the protocol, the agent and the workload
 * set-up (session, rlimits, capabilities, seccomp), not a sandbox's cost.
 *
 *   MSB_AGENT=build/agent/msb-agent build/tests/agent/bench-exec-rtt [N]
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void report(const char *what, double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	printf("%-28s p50 %.3f ms  p90 %.3f ms  p99 %.3f ms  (n=%d)\n", what, v[n / 2],
	       v[n * 9 / 10], v[n * 99 / 100], n);
}

int main(int argc, char **argv)
{
	const char *bin = getenv("MSB_AGENT");
	int n = argc > 1 ? (int)strtol(argv[1], NULL, 10) : 200;
	if (!bin || n < 10) {
		fprintf(stderr, "usage: MSB_AGENT=path/to/msb-agent %s [N>=10]\n", argv[0]);
		return 2;
	}
	char dir[] = "/tmp/msb-bench-XXXXXX", sock[64], work[64];
	if (!mkdtemp(dir))
		return 1;
	snprintf(sock, sizeof(sock), "%s/agent.sock", dir);
	snprintf(work, sizeof(work), "%s/work", dir);
	mkdir(work, 0755);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 16) < 0)
		return 1;
	pid_t agent = fork();
	if (agent == 0) {
		/* dup2 onto itself keeps O_CLOEXEC: clear it then */
		if (lfd == 3)
			fcntl(3, F_SETFD, 0);
		else
			dup2(lfd, 3);
		setenv("MSB_AGENT_LISTEN_FD", "3", 1);
		execl(bin, "msb-agent", "--work", work, (char *)NULL);
		_exit(127);
	}
	close(lfd);

	msb_client *c = NULL;
	msb_error *err = NULL;
	if (msb_client__connect(sock, 5, &c, &err) < 0) {
		fprintf(stderr, "connect: %s\n", msb_error_message(err));
		return 1;
	}
	static const char *const truev[] = {"/bin/true", NULL};
	double *agent_ms = calloc((size_t)n, sizeof(double));
	double *fork_ms = calloc((size_t)n, sizeof(double));
	for (int i = -20; i < n; i++) { /* 20 warm-up rounds */
		msb_exec_request req = MSB_EXEC_REQUEST_INIT;
		msb_exec_result res = {0};
		req.argv = truev;
		req.timeout = 10;
		double t0 = now_ms();
		if (msb_client__exec(c, &req, &res, &err) < 0 || res.exit_code != 0) {
			fprintf(stderr, "exec failed\n");
			return 1;
		}
		double t1 = now_ms();
		msb_exec_result_clear(&res);
		pid_t p = fork();
		if (p == 0) {
			execv("/bin/true", (char *const *)truev);
			_exit(127);
		}
		waitpid(p, NULL, 0);
		double t2 = now_ms();
		if (i >= 0) {
			agent_ms[i] = t1 - t0;
			fork_ms[i] = t2 - t1;
		}
	}
	report("exec /bin/true via agent", agent_ms, n);
	report("fork+exec /bin/true", fork_ms, n);
	printf("ratio of medians: %.2f\n", agent_ms[n / 2] / fork_ms[n / 2]);

	msb_client__free(c);
	kill(agent, SIGTERM);
	waitpid(agent, NULL, 0);
	unlink(sock);
	rmdir(work);
	rmdir(dir);
	return 0;
}
