/* SPDX-License-Identifier: Apache-2.0 */
/* msb: entry point, verb table, shared helpers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cli.h"

static int cmd_version(int argc, char **argv);
static const cli_verb verb_version = {
	"version",
	"print the version",
	"usage: msb version\n\nPrint the library version.\n",
	cmd_version,
};

static const cli_verb *const verbs[] = {
	&verb_run,   &verb_acquire, &verb_exec,	   &verb_ls,	&verb_dispose,
	&verb_purge, &verb_pool,    &verb_doctor,  &verb_check, &verb_conformance,
	&verb_serve, &verb_mcp,	    &verb_version,
};

static void print_help(FILE *f)
{
	fprintf(f, "usage: msb VERB [OPTIONS]\n\n"
		   "msb runs model-written code in sandboxes through a policy router.\n\n"
		   "verbs:\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %-12s %s\n", verbs[i]->name, verbs[i]->summary);
	fprintf(f, "\nRun `msb VERB --help` for a verb's options.\n"
		   "Exit status: 0 served/ok, 2 bad input, 3 policy refusal, 4 not implemented,\n"
		   "5 file error, 6 timeout, 7 cancelled, 8 output refusal, 1 other failure\n"
		   "(docs/errors.md).\n");
}

static int cmd_version(int argc, char **argv)
{
	(void)argv;
	if (argc > 1)
		return cli_usage(&verb_version, "unexpected argument `%s`", argv[1]);
	printf("msb %s\n", msb_version());
	return 0;
}

int cli_fail(msb_error *err)
{
	int code = msb_error_code(err);
	fprintf(stderr, "msb: %s: %s\n", msb_error_name(err),
		msb_error_message(err) ? msb_error_message(err) : "failed");
	msb_error_free(err);
	return msb_code_exit_status(code);
}

int cli_usage(const cli_verb *verb, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "msb %s: ", verb->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%s", verb->usage);
	return 2;
}

bool cli_beside_binary(const char *rel, int mode, char *out, size_t size)
{
	char exe[PATH_MAX];
	out[0] = '\0';
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return false;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return false;
	*slash = '\0';
	int w = snprintf(out, size, "%.*s/../%s", PATH_MAX - 64, exe, rel);
	if (w < 0 || (size_t)w >= size || access(out, mode) != 0) {
		out[0] = '\0';
		return false;
	}
	return true;
}

void cli_random_hex(char *out, size_t nbytes)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t b[16] = {0};
	if (nbytes > sizeof(b))
		nbytes = sizeof(b);
	if (getrandom(b, nbytes, 0) != (ssize_t)nbytes)
		memset(b, 0, sizeof(b));
	for (size_t i = 0; i < nbytes; i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[2 * nbytes] = '\0';
}

void cli_locate_helpers(void)
{
	static const struct {
		const char *env, *rel;
	} helpers[] = {{"MSB_SHIM", "shim/msb-shim"}, {"MSB_AGENT", "agent/msb-agent"}};
	char path[PATH_MAX];
	for (size_t i = 0; i < 2; i++)
		if (!getenv(helpers[i].env) &&
		    cli_beside_binary(helpers[i].rel, X_OK, path, sizeof(path)))
			setenv(helpers[i].env, path, 0);
}

bool cli_wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
	return false;
}

void cli_log(void *ud, msb_log_level level, const char *component, const char *message)
{
	(void)ud;
	if (level < MSB_LOG_WARNING)
		return;
	fprintf(stderr, "msb: %s: %s: %s\n", level == MSB_LOG_WARNING ? "warning" : "error",
		component, message);
}

int cli_read_file(const char *path, char **out, size_t *len, msb_error **err)
{
	int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return msb_error_set(err, MSB_E_NOT_FOUND, "cannot open `%s`: %s", path,
				     strerror(errno));
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (!buf)
			break;
		if (n + 1 >= cap) {
			if (cap > (64u << 20)) {
				free(buf);
				if (fd != STDIN_FILENO)
					close(fd);
				return msb_error_set(err, MSB_E_VALUE, "`%s` is too large", path);
			}
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(buf);
			if (fd != STDIN_FILENO)
				close(fd);
			return msb_error_set(err, MSB_E_OS, "cannot read `%s`: %s", path,
					     strerror(e));
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (fd != STDIN_FILENO)
		close(fd);
	if (!buf)
		return msb_error_set(err, MSB_E_NOMEM, "out of memory");
	buf[n] = 0;
	*out = buf;
	*len = n;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		print_help(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		print_help(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0)
		return cmd_version(1, argv + 1);
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		if (strcmp(argv[1], verbs[i]->name) == 0) {
			if (cli_wants_help(argc - 1, argv + 1)) {
				fputs(verbs[i]->usage, stdout);
				return 0;
			}
			return verbs[i]->run(argc - 1, argv + 1);
		}
	}
	fprintf(stderr, "msb: unknown verb `%s`\n\n", argv[1]);
	print_help(stderr);
	return 2;
}
