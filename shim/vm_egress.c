/* SPDX-License-Identifier: Apache-2.0 */
/* msb-vm-shim's egress proxy process: see vm_egress.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends/ns/boundary/shim.h"
#include "egress_proxy.h"
#include "util/fs.h"
#include "vm_egress.h"

#define EGRESS_MAX (1024 * 1024)
#define REPORT_MS 10000
/* On stop, how long the proxy gets to close its tunnels and write their
 * records before it is killed. */
#define STOP_MS 2000

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
	(void)sig;
	stopping = 1;
}

/* The log line of egress_proxy.c (the shims' shared one). */
void shim_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	msb_ns__shim_log("%s", line);
}

static int parse(const char *json, size_t len, msb_egress_config *cfg, char *why, size_t size)
{
	msb_egress__config_init(cfg);
	msb_error *e = NULL;
	if (msb_egress__config_from_json(cfg, json, len, true, &e) < 0) {
		snprintf(why, size, "egress: %s", msb_error_message(e));
		msb_error_free(e);
		msb_egress__config_clear(cfg);
		return -1;
	}
	return 0;
}

int vm_egress_load(const char *state_dir, char **json, size_t *len, char *why, size_t size)
{
	*json = NULL;
	*len = 0;
	_cleanup_free_ char *path = msb__asprintf("%s/%s", state_dir, VM_EGRESS_FILE);
	if (!path) {
		snprintf(why, size, "out of memory");
		return -1;
	}
	int r = msb__read_file_at(AT_FDCWD, path, EGRESS_MAX, json, len);
	if (r == -ENOENT)
		return 0;
	if (r < 0) {
		snprintf(why, size, "egress `%s`: %s", path, strerror(-r));
		return -1;
	}
	msb_egress_config cfg;
	if (parse(*json, *len, &cfg, why, size) < 0) {
		free(*json);
		*json = NULL;
		return -1;
	}
	msb_egress__config_clear(&cfg);
	return 0;
}

static _Noreturn void proxy_main(pid_t parent, int dfd, int report, msb_egress_config *cfg)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != parent)
		_exit(1);
	prctl(PR_SET_NAME, "msb-vm-egress", 0, 0, 0);
	/* SIGTERM: close every tunnel (their records are written), then go. */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_term;
	sigaction(SIGTERM, &sa, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Only the state directory and the report pipe (and stdio). */
	int d = fcntl(dfd, F_DUPFD_CLOEXEC, 16), r = fcntl(report, F_DUPFD_CLOEXEC, 16);
	if (d < 0 || r < 0 || dup3(d, 3, O_CLOEXEC) < 0 || dup3(r, 4, O_CLOEXEC) < 0)
		_exit(1);
	syscall(SYS_close_range, 5u, ~0u, 0u);
	proxy *p = NULL;
	char why[512], line[600];
	if (proxy_start(&p, cfg, 3, false, why, sizeof(why)) < 0) {
		int n = snprintf(line, sizeof(line), "error: %s\n", why);
		ssize_t w = write(4, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
		(void)w;
		_exit(1);
	}
	ssize_t w = write(4, "ok\n", 3);
	(void)w;
	close(4);
	while (!stopping) {
		struct pollfd pf = {.fd = proxy_fd(p), .events = POLLIN};
		if (poll(&pf, 1, proxy_timeout_ms(p)) < 0 && errno != EINTR)
			break;
		if (stopping || proxy_run(p) < 0)
			break;
	}
	proxy_stop(p);
	_exit(0);
}

int vm_egress_start(vm_egress *e, int dfd, const char *json, size_t len, char *why, size_t size)
{
	msb_egress_config cfg;
	if (parse(json, len, &cfg, why, size) < 0)
		return -1;
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(why, size, "pipe: %s", strerror(errno));
		msb_egress__config_clear(&cfg);
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		proxy_main(parent, dfd, p[1], &cfg);
	}
	int fe = errno;
	msb_egress__config_clear(&cfg);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		snprintf(why, size, "fork the egress proxy: %s", strerror(fe));
		return -1;
	}
	e->pid = pid;
	e->report = p[0];
	e->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (e->pidfd < 0) {
		snprintf(why, size, "pidfd_open: %s", strerror(errno));
		vm_egress_stop(e);
		return -1;
	}
	return 0;
}

int vm_egress_report(vm_egress *e, char *why, size_t size)
{
	char line[600];
	size_t len = 0;
	int64_t until = msb__now_ns() + (int64_t)REPORT_MS * 1000000;
	while (len < sizeof(line) - 1 && !memchr(line, '\n', len)) {
		struct pollfd p = {.fd = e->report, .events = POLLIN};
		int64_t left = (until - msb__now_ns()) / 1000000;
		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		ssize_t n = read(e->report, line + len, sizeof(line) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	line[len] = '\0';
	char *nl = strchr(line, '\n');
	if (nl)
		*nl = '\0';
	close(e->report);
	e->report = -1;
	if (strcmp(line, "ok") == 0)
		return 0;
	snprintf(why, size, "egress: the proxy did not start: %.500s",
		 strncmp(line, "error: ", 7) == 0 ? line + 7 : "it exited without a word");
	return -1;
}

void vm_egress_stop(vm_egress *e)
{
	if (e->report >= 0) {
		close(e->report);
		e->report = -1;
	}
	if (e->pid > 0) {
		/* A moment to write the records of the tunnels still open. */
		struct pollfd p = {.fd = e->pidfd, .events = POLLIN};
		if (e->pidfd < 0 || kill(e->pid, SIGTERM) < 0 || poll(&p, 1, STOP_MS) <= 0)
			kill(e->pid, SIGKILL);
		while (waitpid(e->pid, NULL, 0) < 0 && errno == EINTR)
			;
		e->pid = 0;
	}
	if (e->pidfd >= 0) {
		close(e->pidfd);
		e->pidfd = -1;
	}
}
