/* SPDX-License-Identifier: Apache-2.0 */
/* msb: entry point, verb table, shared helpers. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_verbs.h"
#include "os.h"

static int cmd_version(int argc, char **argv);
static const cli_verb verb_version = {
	.name = "version",
	.summary = "print the version",
	.synopsis = "msb version",
	.description = "Print the library version.\n",
	.run = cmd_version,
};

static const cli_verb *const verbs[] = {CLI_VERBS};

const cli_verb *const *cli_verbs(size_t *n)
{
	*n = sizeof(verbs) / sizeof(verbs[0]);
	return verbs;
}

const char cli_overview[] =
	"msb runs model-written code in sandboxes through a policy router: every verb that\n"
	"creates or uses a sandbox asks the router, whose default floor is microvm, so a\n"
	"weaker backend (the default one here, `" CLI_DEFAULT_BACKEND "`, is a container\n"
	"sandbox) is refused until the caller opts down - with --min-isolation container,\n"
	"or once, in the configuration file.\n";

const char *cli_config_overview(void)
{
	static char text[2048];
	if (!text[0])
		snprintf(text, sizeof(text),
			 "Every verb reads one configuration file, the first that exists of\n"
			 "$MSB_CONFIG, %s. It is one JSON object with three optional keys, each\n"
			 "strict: `router` (router JSON without backends: min_isolation, "
			 "selection,\n"
			 "denied capabilities, ...), `backend` (one backend JSON object: the "
			 "default\n"
			 "backend, e.g. its image and egress settings) and `defaults` "
			 "(`resources`:\n"
			 "the spec's memory_bytes, pids_max, cpu_millis, writable_bytes;\n"
			 "`pool_size`: read by the warm pool; `env`: the spec's env, {\"NAME\":\n"
			 "\"value\"}, under --env). A flag beats the file, the file beats the\n"
			 "built-in default; `msb config show` prints each value and its source, "
			 "and\n"
			 "which file it found and how. With no file the floor is microvm; a file\n"
			 "holding only\n"
			 "\n"
			 "  {\"router\": {\"min_isolation\": \"container\"}}\n"
			 "\n"
			 "opts down and keeps the default backend (" CLI_DEFAULT_BACKEND ").\n",
			 cli_os_config_places);
	return text;
}

const char *cli_environment(void)
{
	static char text[1024];
	if (!text[0])
		snprintf(text, sizeof(text),
			 "MSB_CONFIG: the configuration file, and no other; set and empty: none at "
			 "all.\n%s"
			 "MSB_STATE_DIR: the ns state root (else /run/msb as root, "
			 "$XDG_RUNTIME_DIR/msb).\n"
			 "MSB_SHIM, MSB_AGENT: the msb-shim and msb-agent binaries.\n",
			 cli_os_config_env);
	return text;
}

const char cli_exit_status[] =
	"0 served/ok, 2 bad input, 3 policy refusal, 4 not implemented, 5 file error,\n"
	"6 timeout, 7 cancelled, 8 output refusal, 9 a conformance probe failed, 1 other\n"
	"failure (docs/errors.md). run and exec exit with the command's status.\n";

static void print_help(FILE *f)
{
	fprintf(f, "usage: msb VERB [OPTIONS]\n\n%s\nverbs:\n", cli_overview);
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %-12s %s\n", verbs[i]->name, verbs[i]->summary);
	fprintf(f,
		"\nRun `msb VERB --help` for a verb's options, `msb man | man -l -` for the\n"
		"manual.\n\nExit status:\n%s",
		cli_exit_status);
}

static int cmd_version(int argc, char **argv)
{
	(void)argv;
	if (argc > 1)
		return cli_usage(&verb_version, "unexpected argument `%s`", argv[1]);
	printf("msb %s\n", msb_version());
	return 0;
}

bool cli_parse_count(const char *s, bool suffixes, uint64_t *out)
{
	char *end = NULL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || !end || end == s || s[0] == '-' || v == 0)
		return false;
	unsigned shift = 0;
	if (suffixes && *end && !end[1]) {
		switch (*end) {
		case 'K':
		case 'k':
			shift = 10;
			break;
		case 'M':
		case 'm':
			shift = 20;
			break;
		case 'G':
		case 'g':
			shift = 30;
			break;
		default:
			return false;
		}
		end++;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
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
	fputc('\n', stderr);
	cli_print_usage(verb, stderr);
	return 2;
}

bool cli_beside_binary(const char *rel, int mode, char *out, size_t size)
{
	char exe[PATH_MAX];
	out[0] = '\0';
	if (!cli_os_exe_dir(exe, sizeof(exe)))
		return false;
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
	if (cli_os_random(b, nbytes) < 0)
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
	} helpers[] = {{"MSB_SHIM", "shim/msb-shim"},
		       {"MSB_AGENT", "agent/msb-agent"},
		       {"MSB_EGRESS_PROXY", "proxy/msb-egress-proxy"},
		       {"MSB_OCI_SHIM", "src/backends/oci/msb-oci-shim"},
		       {"MSB_VM_SHIM", "shim/msb-vm-shim"}};
	char path[PATH_MAX];
	for (size_t i = 0; i < sizeof(helpers) / sizeof(helpers[0]); i++)
		if (!getenv(helpers[i].env) &&
		    cli_beside_binary(helpers[i].rel, X_OK, path, sizeof(path)))
			cli_os_setenv(helpers[i].env, path);
}

bool cli_wants_help(int argc, char **argv)
{
	/* After "--" the words are the command's, not ours. */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
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
	int fd = strcmp(path, "-") == 0 ? STDIN_FILENO : cli_os_open_read(path);
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
	cli_os_binary_stdio();
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
				cli_print_usage(verbs[i], stdout);
				return 0;
			}
			return verbs[i]->run(argc - 1, argv + 1);
		}
	}
	fprintf(stderr, "msb: unknown verb `%s`\n\n", argv[1]);
	print_help(stderr);
	return 2;
}
