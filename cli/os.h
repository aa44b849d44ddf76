/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the CLI needs from the operating system beyond ISO C and msb's own
 * API, one implementation per platform: os_posix.c, os_win32.c (docs/windows.md;
 * cli/meson.build picks one). The CLI links only the public library, so this
 * is its own small layer, not src/platform.
 */
#ifndef MSB_CLI_OS_H
#define MSB_CLI_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <sys/types.h>

/* stdin, stdout and stderr carry bytes as they are (Windows' C runtime
 * would turn "\n" into "\r\n" in text mode); at the start of main. */
void cli_os_binary_stdio(void);

/* Set an environment variable of this process (and its children). */
void cli_os_setenv(const char *name, const char *value);

/* n bytes from the system's random source: 0, or -1. */
int cli_os_random(void *buf, size_t n);

/* The directory of the running program, without a trailing separator. */
bool cli_os_exe_dir(char *out, size_t size);

/* Open a file to read (not inherited, never a controlling terminal), or to
 * append to (created 0600 when absent): a descriptor, or -1 with errno. */
int cli_os_open_read(const char *path);
int cli_os_open_append(const char *path);

/* The current time as seconds since the epoch, wall clock. */
double cli_os_wall_seconds(void);

/* SIGINT and SIGTERM (and SIGHUP where there is one) to fn, or back to their
 * defaults with fn NULL. fn may run on another thread (Windows runs a
 * console's Ctrl-C handler on one): it only records the signal. */
void cli_os_catch_stop_signals(void (*fn)(int));

/*
 * The event channel of `msb serve` (cli/rpc/server.c): fds[1] for the
 * JSON-lines recorder's writes, fds[0] read without blocking (whole lines on
 * a POSIX seqpacket socket; any part of the stream on Windows' pipe: the
 * reader joins lines). 0 or -1.
 */
int cli_os_event_channel(int fds[2], size_t bufsize);
/* Up to cap bytes that are there now: > 0, or 0 when none (or the writer
 * closed), never blocking. */
ssize_t cli_os_event_read(int fd, char *buf, size_t cap);
/* Wait until fd has bytes or `*stop` is set: false once stopping. The
 * stopper sets `*stop`, then calls cli_os_event_wake on the writer's end;
 * POSIX blocks until then, Windows' pipe is looked at every 20 ms. */
bool cli_os_event_wait(int fd, const atomic_bool *stop);
void cli_os_event_wake(int writer);
/* Up to n bytes of stdin, waiting for them: > 0, 0 at its end, -errno. */
ssize_t cli_os_read_stdin(void *buf, size_t n);

/*
 * Where this platform keeps the configuration file (docs/cli.md "The
 * configuration file"): the per-user one, then the system-wide one, each
 * written to out ("" when the variables name none) with how it was found
 * ("$XDG_CONFIG_HOME", "%APPDATA%", ...). $MSB_SYSTEM_CONFIG, for tests,
 * replaces the system-wide path on both.
 */
void cli_os_config_user(char *out, size_t size, const char **found_by);
void cli_os_config_system(char *out, size_t size, const char **found_by);
/* The same places in words, for --help and msb man: "A, B" and the
 * environment's lines naming the variables. */
extern const char cli_os_config_places[], cli_os_config_env[];

#endif
