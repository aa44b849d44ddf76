/* SPDX-License-Identifier: Apache-2.0 */
/* The agent out of a workload's reach: PID 1's /proc entries and signals
 * (docs/security.md, issue 15 finding 2). */
#include "probe.h"

/* ---- PID 1's /proc entries and signals (issue 15 finding 2) ----------------------- */

/* Raising the agent's OOM score made the next memory fill kill it. The file
 * is only opened for writing, never written. */
void p_pid1_oom_score(const struct ctx *c, struct res *r)
{
	int fd = open("/proc/1/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		set(r, "blocked", "open `/proc/1/oom_score_adj` for writing: %s", errname(errno));
		return;
	}
	close(fd);
	set(r, "escaped", "opened `/proc/1/oom_score_adj` for writing");
}

void p_pid1_environ(const struct ctx *c, struct res *r)
{
	must_not_read(r, "/proc/1/environ");
}

void p_pid1_maps(const struct ctx *c, struct res *r)
{
	must_not_read(r, "/proc/1/maps");
}

/* PID 1's caught signals (SigCgt of /proc/1/status), if it can be read. */
static bool pid1_caught(uint64_t *mask)
{
	FILE *f = fopen("/proc/1/status", "re");
	if (!f)
		return false;
	char line[256];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		if (strncmp(line, "SigCgt:", 7) == 0) {
			*mask = strtoull(line + 7, NULL, 16);
			found = true;
		}
	fclose(f);
	return found;
}

/* Every signal an agent may catch (the one kill-pid1 sends cannot be). A
 * PID 1 of this namespace gets a signal from it only if it catches that
 * signal; an agent that took one as an order to stop would take the sandbox
 * - and this run - down. So when PID 1 can be seen catching one that this
 * process may send it, that is the finding, and nothing is sent; otherwise
 * they are all sent and PID 1 must live on. */
void p_signal_pid1(const struct ctx *c, struct res *r)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM};
	uint64_t caught = 0;
	if (pid1_caught(&caught) && kill(1, 0) == 0) {
		for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
			if (caught & (1ull << (sigs[i] - 1))) {
				set(r, "escaped",
				    "PID 1 catches signal %d and this process may send it one",
				    sigs[i]);
				return;
			}
	}
	int sent = 0, refused = 0, err = 0;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		if (kill(1, sigs[i]) == 0) {
			sent++;
		} else {
			refused++;
			err = errno;
		}
	}
	usleep(200000);
	if (sent == 0)
		set(r, "blocked", "kill(1, ...): %s", errname(err));
	else if (kill(1, 0) == 0 || errno == EPERM)
		set(r, "blocked", "%d signals sent to PID 1 (%d refused), and it lives on", sent,
		    refused);
	else
		set(r, "escaped", "PID 1 is gone after %d signals", sent);
}
