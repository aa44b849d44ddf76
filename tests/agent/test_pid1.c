/* SPDX-License-Identifier: Apache-2.0 */
/*
 * msb-agent as PID 1 of fresh pid and mount namespaces (its production
 * role), when the tests run as root with util-linux unshare: it reaps
 * orphans, a timeout leaves nothing of the command in the namespace, and
 * SIGTERM takes everything down. Skipped otherwise.
 */
#include <criterion/criterion.h>
#include <errno.h>
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

Test(pid1, runs_as_init)
{
	msb_exec_result res = sh("echo $PPID", 10, 0);
	cr_assert_str_eq((const char *)res.stdout_bytes, "1\n");
	msb_exec_result_clear(&res);
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
