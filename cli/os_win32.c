/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's OS layer on Windows (cli/os.h; docs/windows.md). */
#include <windows.h>

#include <bcrypt.h>
#include <errno.h>
#include <fcntl.h>
#include <io.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "os.h"

void cli_os_binary_stdio(void)
{
	_setmode(0, _O_BINARY);
	_setmode(1, _O_BINARY);
	_setmode(2, _O_BINARY);
}

void cli_os_setenv(const char *name, const char *value)
{
	_putenv_s(name, value);
}

int cli_os_random(void *buf, size_t n)
{
	return BCRYPT_SUCCESS(BCryptGenRandom(NULL, buf, (ULONG)n, BCRYPT_USE_SYSTEM_PREFERRED_RNG))
		       ? 0
		       : -1;
}

bool cli_os_exe_dir(char *out, size_t size)
{
	wchar_t exe[MAX_PATH];
	DWORD n = GetModuleFileNameW(NULL, exe, MAX_PATH);
	if (n == 0 || n >= MAX_PATH)
		return false;
	wchar_t *slash = wcsrchr(exe, L'\\');
	if (!slash)
		return false;
	*slash = L'\0';
	int m = WideCharToMultiByte(CP_UTF8, 0, exe, -1, out, (int)size, NULL, NULL);
	return m > 0;
}

int cli_os_open_read(const char *path)
{
	return _open(path, _O_RDONLY | _O_BINARY | _O_NOINHERIT);
}

int cli_os_open_append(const char *path)
{
	return _open(path, _O_WRONLY | _O_APPEND | _O_CREAT | _O_BINARY | _O_NOINHERIT,
		     _S_IREAD | _S_IWRITE);
}

double cli_os_wall_seconds(void)
{
	FILETIME ft;
	GetSystemTimePreciseAsFileTime(&ft);
	ULONGLONG t = ((ULONGLONG)ft.dwHighDateTime << 32) | ft.dwLowDateTime;
	/* 100 ns ticks since 1601 */
	return (double)(t - 116444736000000000ULL) / 1e7;
}

/* The C runtime's signal(): Ctrl-C and Ctrl-Break of the console arrive as
 * SIGINT and SIGBREAK, on a thread of their own. */
void cli_os_catch_stop_signals(void (*fn)(int))
{
	static const int sigs[] = {SIGINT, SIGTERM, SIGBREAK};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], fn ? fn : SIG_DFL);
}

/* An anonymous pipe (a stream): the reader joins lines. */
int cli_os_event_channel(int fds[2], size_t bufsize)
{
	return _pipe(fds, (unsigned)bufsize, _O_BINARY | _O_NOINHERIT);
}

ssize_t cli_os_event_read(int fd, char *buf, size_t cap)
{
	HANDLE h = (HANDLE)_get_osfhandle(fd);
	DWORD avail = 0, got = 0;
	if (h == INVALID_HANDLE_VALUE || !PeekNamedPipe(h, NULL, 0, NULL, &avail, NULL) ||
	    avail == 0)
		return 0;
	if (!ReadFile(h, buf, avail < cap ? avail : (DWORD)cap, &got, NULL))
		return 0;
	return (ssize_t)got;
}

/* An anonymous pipe has nothing to wait on: it is looked at every 20 ms,
 * which is how a stop is seen too. */
void cli_os_event_wake(int writer)
{
	(void)writer;
}

/* An anonymous pipe has nothing to wait on: it is looked at every 20 ms. */
bool cli_os_event_wait(int fd, const atomic_bool *stop)
{
	HANDLE h = (HANDLE)_get_osfhandle(fd);
	while (!atomic_load(stop)) {
		DWORD avail = 0;
		if (h == INVALID_HANDLE_VALUE || !PeekNamedPipe(h, NULL, 0, NULL, &avail, NULL))
			return false;
		if (avail > 0)
			return true;
		Sleep(20);
	}
	return false;
}

/* ---- the configuration file's places (docs/cli.md, docs/windows.md) ---- */

const char cli_os_config_places[] = "%APPDATA%\\msb\\config.json (the per-user one) and\n"
				    "%ProgramData%\\msb\\config.json (the system-wide one)";
const char cli_os_config_env[] =
	"APPDATA, ProgramData: where the per-user and the system-wide configuration\n"
	"files are looked for.\n"
	"MSB_SYSTEM_CONFIG: for tests only - the system-wide file instead of\n"
	"%ProgramData%\\msb\\config.json.\n";

/* A drive's absolute path (C:\\...) or a UNC one (\\\\server\\...): a
 * relative one names nothing, as a relative XDG directory does not. */
static bool absolute(const char *p)
{
	return p && ((((p[0] | 0x20) >= 'a' && (p[0] | 0x20) <= 'z') && p[1] == ':' &&
		      (p[2] == '\\' || p[2] == '/')) ||
		     (p[0] == '\\' && p[1] == '\\'));
}

static void under(const char *var, char *out, size_t size, const char **found_by, const char *label)
{
	const char *dir = getenv(var);
	out[0] = '\0';
	*found_by = NULL;
	if (absolute(dir)) {
		size_t n = strlen(dir);
		bool sep = n > 0 && (dir[n - 1] == '\\' || dir[n - 1] == '/');
		snprintf(out, size, "%s%smsb\\config.json", dir, sep ? "" : "\\");
		*found_by = label;
	}
}

void cli_os_config_user(char *out, size_t size, const char **found_by)
{
	under("APPDATA", out, size, found_by, "%APPDATA%");
}

void cli_os_config_system(char *out, size_t size, const char **found_by)
{
	const char *sys = getenv("MSB_SYSTEM_CONFIG");
	if (sys && *sys) {
		snprintf(out, size, "%s", sys);
		*found_by = "$MSB_SYSTEM_CONFIG";
		return;
	}
	under("ProgramData", out, size, found_by, "%ProgramData%");
}

ssize_t cli_os_read_stdin(void *buf, size_t n)
{
	unsigned want = n > (1u << 30) ? (1u << 30) : (unsigned)n;
	int r = _read(0, buf, want);
	return r < 0 ? -errno : r;
}
