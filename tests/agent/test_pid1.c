/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-agent as PID 1 of fresh pid and mount namespaces (its production
 * role), when the tests run as root with util-linux unshare: workloads run
 * in a pid namespace of their own where the agent does not exist (issue 15
 * finding 2), orphans are reaped, a timeout leaves nothing of the command
 * in the namespace, and SIGTERM takes everything down. Skipped otherwise.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "harness.h"

static struct agent_proc ap;
static msb_client *cl;

static void setup(void)
{
	int rc = agent_start_pid1(&ap);
	if (rc == -ENOTSUP)
		cr_skip_test("needs root and unshare(1)");
	cr_assert_eq(rc, 0);
	msb_error *err = NULL;
	rc = msb_client__connect(ap.sock, 10.0, &cl, &err);
	cr_assert_eq(rc, 0, "connect: %s", err ? msb_error_message(err) : "?");
}

static void teardown(void)
{
	msb_client__free(cl);
	cl = NULL;
	agent_stop(&ap);
}

TestSuite(pid1, .init = setup, .fini = teardown, .timeout = 60);

static msb_exec_result sh(const char *line, double timeout, int want_rc)
{
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	req.shell = line;
	req.timeout = timeout;
	int rc = msb_client__exec(cl, &req, &res, &err);
	cr_assert_eq(rc, want_rc, "`%s`: %d %s", line, rc, err ? msb_error_message(err) : "");
	msb_error_free(err);
	return res;
}

/* Processes in the namespace other than the agent; zombies counted apart. */
static void count_procs(size_t *live, size_t *zombies)
{
	msb_client_proc *procs = NULL;
	size_t n = 0;
	cr_assert_eq(msb_client__ps(cl, 10, &procs, &n, NULL), 0);
	*live = *zombies = 0;
	bool agent = false;
	for (size_t i = 0; i < n; i++) {
		if (procs[i].pid == 1) {
			agent = true;
			cr_assert_str_eq(procs[i].comm, "msb-agent");
			continue;
		}
		if (procs[i].state == 'Z')
			(*zombies)++;
		else
			(*live)++;
	}
	cr_assert(agent, "PID 1 is not in the snapshot");
	msb_client__procs_free(procs, n);
}

/* The agent is PID 1 of its namespace (the snapshot is taken from there),
 * and a workload's parent is outside the workloads' own namespace: pid 0, as
 * for a process `docker exec` started. */
Test(pid1, runs_as_init)
{
	size_t live, zombies;
	count_procs(&live, &zombies);
	cr_assert_eq(live, 0, "the snapshot lists the agent only");
	msb_exec_result res = sh("echo $PPID; echo $$", 10, 0);
	cr_assert_str_eq((const char *)res.stdout_bytes, "0\n2\n",
			 "the first workload is pid 2 of its namespace, its parent invisible");
	msb_exec_result_clear(&res);
}

/* Issue 15 finding 2: nothing of PID 1 is within a workload's reach - its
 * /proc entries (score, environment, memory, maps, exe), its signals. The
 * reaper that is PID 1 of the workloads' namespace is hidden too. */
Test(pid1, workloads_cannot_reach_pid1)
{
	msb_exec_result res =
		sh("for f in oom_score_adj environ mem maps exe cmdline; do "
		   "  [ -e /proc/1/$f ] && echo \"reached $f\"; done; "
		   "(echo 1000 > /proc/1/oom_score_adj) 2>/dev/null && echo wrote-score; "
		   "cat /proc/1/environ 2>/dev/null && echo read-environ; "
		   "head -c1 /proc/1/mem 2>/dev/null && echo read-mem; "
		   "for s in TERM INT QUIT HUP USR1 USR2 KILL; do kill -$s 1 2>/dev/null; done; "
		   "ls /proc | grep -qx 1 && echo listed-1; echo done",
		   10, 0);
	cr_assert_str_eq((const char *)res.stdout_bytes, "done\n", "reached: %s",
			 (const char *)res.stdout_bytes);
	msb_exec_result_clear(&res);
	usleep(200 * 1000);
	cr_assert(agent_alive(&ap), "the agent died of its workload's signals");
	char path[64], score[32] = "";
	snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)agent_pid(&ap));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_gt(read(fd, score, sizeof(score) - 1), 0);
	close(fd);
	cr_assert_str_eq(score, "0\n", "the agent's OOM score is untouched");
	res = sh("echo ok", 10, 0);
	cr_assert_str_eq((const char *)res.stdout_bytes, "ok\n");
	msb_exec_result_clear(&res);
}

/* The agent's child that is not an exec: the workloads' reaper. */
static pid_t find_reaper(void)
{
	pid_t agent = agent_pid(&ap);
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)agent, (int)agent);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	cr_assert_gt(n, 0, "the agent has no child");
	buf[n] = 0;
	for (char *p = buf; *p;) {
		pid_t pid = (pid_t)strtol(p, &p, 10);
		char comm[64] = "";
		snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			ssize_t m = read(fd, comm, sizeof(comm) - 1);
			close(fd);
			comm[m > 0 ? m : 0] = 0;
		}
		if (strcmp(comm, "msb-agent\n") == 0)
			return pid;
		while (*p == ' ' || *p == '\n')
			p++;
	}
	cr_assert_fail("no reaper among the agent's children: %s", buf);
	return -1;
}

/* The reaper dies (an OOM kill would do it): its namespace and every
 * workload in it go, and the next exec runs in a new one. */
Test(pid1, a_dead_reaper_is_replaced)
{
	msb_exec_result res = sh("setsid sleep 100 >/dev/null 2>&1 </dev/null & exit 0", 10, 0);
	msb_exec_result_clear(&res);
	pid_t reaper = find_reaper();
	cr_assert_eq(kill(reaper, SIGKILL), 0);
	cr_assert(pid_gone(reaper, 5), "the reaper outlived SIGKILL");
	res = sh("echo $$; set -- /proc/[0-9]*; echo $#; [ -e /proc/1 ] || echo hidden", 10, 0);
	cr_assert_str_eq((const char *)res.stdout_bytes, "2\n1\nhidden\n",
			 "a new namespace (the sleeper went with the old one): %s",
			 (const char *)res.stdout_bytes);
	msb_exec_result_clear(&res);
	cr_assert_neq(find_reaper(), reaper);
}

Test(pid1, reaps_orphans)
{
	msb_exec_result res = sh("(sleep 0.2 &) ; setsid sh -c 'sleep 0.2' & exit 0", 10, 0);
	msb_exec_result_clear(&res);
	usleep(800 * 1000);
	size_t live, zombies;
	count_procs(&live, &zombies);
	cr_assert_eq(live, 0);
	cr_assert_eq(zombies, 0, "orphans were not reaped");
}

Test(pid1, timeout_leaves_nothing_behind)
{
	sh("sleep 100 & setsid sleep 100 & (sleep 100 &); sleep 100", 1.0, MSB_E_TIMEOUT);
	usleep(100 * 1000);
	size_t live, zombies;
	count_procs(&live, &zombies);
	/* the third sleep was orphaned in the leader's session: found too */
	cr_assert_eq(live, 0, "%zu processes survived the timeout", live);
	cr_assert_eq(zombies, 0);
	msb_exec_result res = sh("echo ok", 10, 0);
	cr_assert_str_eq((const char *)res.stdout_bytes, "ok\n");
	msb_exec_result_clear(&res);
}

Test(pid1, sigterm_takes_everything_down)
{
	msb_exec_result res = sh("setsid sleep 100 >/dev/null 2>&1 </dev/null & exit 0", 10, 0);
	msb_exec_result_clear(&res);
	size_t live, zombies;
	count_procs(&live, &zombies);
	cr_assert_eq(live, 1, "the orphan runs on after its exec");
	msb_client__free(cl);
	cl = NULL;
	double t0 = now_s();
	agent_stop(&ap); /* unshare's death sends the agent SIGTERM */
	cr_assert_lt(now_s() - t0, 4.0, "the namespace did not go down on SIGTERM");
}
