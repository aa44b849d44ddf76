/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's OS layer on Linux (cli/os.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "os.h"

void cli_os_binary_stdio(void)
{
}

void cli_os_setenv(const char *name, const char *value)
{
	setenv(name, value, 1);
}

int cli_os_random(void *buf, size_t n)
{
	return getrandom(buf, n, 0) == (ssize_t)n ? 0 : -1;
}

bool cli_os_exe_dir(char *out, size_t size)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return false;
	*slash = '\0';
	int w = snprintf(out, size, "%s", exe);
	return w >= 0 && (size_t)w < size;
}

int cli_os_open_read(const char *path)
{
	return open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
}

int cli_os_open_append(const char *path)
{
	return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
}

double cli_os_wall_seconds(void)
{
	struct timespec now;
	if (clock_gettime(CLOCK_REALTIME, &now) < 0)
		return 0;
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

void cli_os_catch_stop_signals(void (*fn)(int))
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
	struct sigaction sa = {.sa_handler = fn ? fn : SIG_DFL, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

int cli_os_event_channel(int fds[2], size_t bufsize)
{
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) < 0)
		return -1;
	int sz = (int)bufsize;
	setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	setsockopt(fds[0], SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	return 0;
}

ssize_t cli_os_event_read(int fd, char *buf, size_t cap)
{
	for (;;) {
		ssize_t n = recv(fd, buf, cap, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		return n < 0 ? 0 : n;
	}
}

/* An empty record wakes the reader's poll (it reads as "nothing there");
 * the channel stays open for a late writer. A full channel wakes it anyway. */
void cli_os_event_wake(int writer)
{
	(void)send(writer, "", 0, MSG_NOSIGNAL | MSG_DONTWAIT);
}

bool cli_os_event_wait(int fd, const atomic_bool *stop)
{
	while (!atomic_load(stop)) {
		struct pollfd p = {fd, POLLIN, 0};
		int r = poll(&p, 1, -1);
		if (r > 0)
			return !atomic_load(stop);
		if (r < 0 && errno != EINTR)
			return false;
	}
	return false;
}

/* ---- the configuration file's places (docs/cli.md) ---- */

const char cli_os_config_places[] =
	"$XDG_CONFIG_HOME/msb/config.json (else ~/.config/msb/config.json) and\n"
	"/etc/msb/config.json";
const char cli_os_config_env[] =
	"XDG_CONFIG_HOME, HOME: where the per-user configuration file is looked for.\n"
	"MSB_SYSTEM_CONFIG: for tests only - the system-wide file instead of\n"
	"/etc/msb/config.json.\n";

void cli_os_config_user(char *out, size_t size, const char **found_by)
{
	/* XDG: a relative $XDG_CONFIG_HOME is ignored, as the spec says. */
	const char *home = getenv("XDG_CONFIG_HOME");
	out[0] = '\0';
	*found_by = NULL;
	if (home && home[0] == '/') {
		snprintf(out, size, "%s/msb/config.json", home);
		*found_by = "$XDG_CONFIG_HOME";
	} else if ((home = getenv("HOME")) && home[0] == '/') {
		snprintf(out, size, "%s/.config/msb/config.json", home);
		*found_by = "$HOME/.config";
	}
}

void cli_os_config_system(char *out, size_t size, const char **found_by)
{
	const char *sys = getenv("MSB_SYSTEM_CONFIG");
	*found_by = sys && *sys ? "$MSB_SYSTEM_CONFIG" : "/etc";
	snprintf(out, size, "%s", sys && *sys ? sys : "/etc/msb/config.json");
}

ssize_t cli_os_read_stdin(void *buf, size_t n)
{
	for (;;) {
		ssize_t r = read(STDIN_FILENO, buf, n);
		if (r >= 0)
			return r;
		if (errno == EAGAIN) { /* a non-blocking stdin: wait for it */
			struct pollfd pf = {.fd = STDIN_FILENO, .events = POLLIN};
			poll(&pf, 1, -1);
		} else if (errno != EINTR) {
			return -errno;
		}
	}
}
