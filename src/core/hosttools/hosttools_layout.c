/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The over-exec transport's guest side, as text: the run layout and its name
 * rules (14.4-14.9), the generated Python shim (14.10-14.12) and the launcher
 * (14.17, 14.32-14.34).
 */
#include <math.h>

#include <msb/hosttools_exec.h>
#include <msb/paths.h>

#include "core/hosttools/hosttools_int.h"

#define SHIM_FILE MSB_HOST_TOOLS_SHIM_MODULE ".py"
#define LAUNCHER_FILE "run_program.sh"
#define CALLS_DIR "host_tool_calls"
#define OUTPUT_FILE "program_output.txt"
#define EXIT_FILE "program_exit_code"
#define PID_FILE "program_pid"
#define GATE_FILE "program_start_gate"

/* Every name the transport writes into its directory (14.8). */
static const char *const transport_names[] = {
	SHIM_FILE, LAUNCHER_FILE,     CALLS_DIR,	 OUTPUT_FILE,
	EXIT_FILE, EXIT_FILE ".part", PID_FILE,		 PID_FILE ".part",
	GATE_FILE, GATE_FILE ".part", "program_session", "program_session.part",
	NULL,
};

/* Module stems a program may not answer to (14.9): the shim's own module, the
 * modules the shim imports, and the modules CPython imports at startup (some
 * only through path lookup on guests older than 3.11). */
static const char *const reserved_stems[] = {
	MSB_HOST_TOOLS_SHIM_MODULE,
	"json",
	"os",
	"time",
	"encodings",
	"site",
	"sitecustomize",
	"usercustomize",
	"abc",
	"codecs",
	"genericpath",
	"io",
	"posixpath",
	"stat",
	"_collections_abc",
	"_sitebuiltins",
	"_bootlocale",
	NULL,
};

static bool in_list(const char *const *list, const char *s)
{
	for (size_t i = 0; list[i]; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

/* The module a file name answers to, or NULL when no loader claims it: the
 * stem before the first "." for a one-dot py/pyc/pyw/so/pyd name, or any
 * multi-dot name ending .so/.pyd (extension-module tags: json.abi3.so). */
static char *module_stem(const char *name)
{
	const char *first = strchr(name, '.');
	if (!first || first == name)
		return NULL;
	const char *last = strrchr(name, '.');
	const char *suffix = last + 1;
	bool claims;
	if (first == last)
		claims = strcmp(suffix, "py") == 0 || strcmp(suffix, "pyc") == 0 ||
			 strcmp(suffix, "pyw") == 0 || strcmp(suffix, "so") == 0 ||
			 strcmp(suffix, "pyd") == 0;
	else
		claims = strcmp(suffix, "so") == 0 || strcmp(suffix, "pyd") == 0;
	return claims ? msb__strndup(name, (size_t)(first - name)) : NULL;
}

static int check_program(const char *program, msb_error **err)
{
	/* 14.7 */
	if (!program[0] || strcmp(program, ".") == 0 || strcmp(program, "..") == 0 ||
	    strchr(program, '/') || strchr(program, '\\'))
		return msb_error_set(err, MSB_E_VALUE,
				     "program must be a plain file name, got `%s`", program);
	/* 14.8 */
	if (in_list(transport_names, program))
		return msb_error_set(err, MSB_E_VALUE,
				     "program `%s` collides with a file the transport writes into "
				     "its directory",
				     program);
	/* 14.9 */
	_cleanup_free_ char *stem = module_stem(program);
	if (stem && in_list(reserved_stems, stem))
		return msb_error_set(err, MSB_E_VALUE,
				     "program `%s` would answer to the module `%s`, which is "
				     "reserved: the shim's own module, a module the shim imports, "
				     "or one CPython imports at startup - it would shadow that "
				     "import from the directory the program shares with the shim",
				     program, stem);
	return 0;
}

void msb_guest_run_layout_clear(msb_guest_run_layout *l)
{
	if (!l)
		return;
	char **f[] = {&l->directory, &l->work,	 &l->transport, &l->program, &l->shim, &l->launcher,
		      &l->calls,     &l->output, &l->exit_code, &l->pid,     &l->gate};
	for (size_t i = 0; i < MSB_ARRAY_SIZE(f); i++) {
		free(*f[i]);
		*f[i] = NULL;
	}
}

int msb_guest_run_layout_new(const char *run_directory, const char *program,
			     msb_guest_run_layout *out, msb_error **err)
{
	if (!run_directory || !out)
		return msb_error_set(err, MSB_E_VALUE, "guest_run_layout: NULL argument");
	if (!program)
		program = "program.py";
	if (!run_directory[0])
		return msb_error_set(err, MSB_E_VALUE, "run_directory must not be empty");
	/* 14.6: PYTHONPATH separates on ":" and cannot quote one. */
	if (strchr(run_directory, ':'))
		return msb_error_set(
			err, MSB_E_VALUE,
			"run_directory `%s` contains `:`, which PYTHONPATH would split "
			"into two entries",
			run_directory);
	if (strchr(run_directory, '\\'))
		return msb_error_set(err, MSB_E_VALUE, "run_directory `%s` contains a backslash",
				     run_directory);
	int rc = check_program(program, err);
	if (rc < 0)
		return rc;
	_cleanup_free_ char *dir = msb_guest_normpath(run_directory);
	if (!dir)
		return msb__error_nomem(err);
	if (dir[0] != '/' &&
	    (strcmp(dir, ".") == 0 || strcmp(dir, "..") == 0 || strncmp(dir, "../", 3) == 0))
		return msb_error_set(err, MSB_E_VALUE,
				     "a relative run_directory must name a directory beneath the "
				     "storage base, got `%s`",
				     run_directory);
	if (strcmp(dir, "/") == 0)
		return msb_error_set(err, MSB_E_VALUE, "run_directory must not be the root");
	msb_guest_run_layout l = {0};
	l.directory = TAKE_PTR(dir);
	l.work = msb__asprintf("%s/" MSB_RUN_WORK_DIRECTORY, l.directory);
	l.transport = msb__asprintf("%s/" MSB_RUN_TRANSPORT_DIRECTORY, l.directory);
	if (l.transport) {
		l.program = msb__asprintf("%s/%s", l.transport, program);
		l.shim = msb__asprintf("%s/" SHIM_FILE, l.transport);
		l.launcher = msb__asprintf("%s/" LAUNCHER_FILE, l.transport);
		l.calls = msb__asprintf("%s/" CALLS_DIR, l.transport);
		l.output = msb__asprintf("%s/" OUTPUT_FILE, l.transport);
		l.exit_code = msb__asprintf("%s/" EXIT_FILE, l.transport);
		l.pid = msb__asprintf("%s/" PID_FILE, l.transport);
		l.gate = msb__asprintf("%s/" GATE_FILE, l.transport);
	}
	if (!l.work || !l.transport || !l.program || !l.shim || !l.launcher || !l.calls ||
	    !l.output || !l.exit_code || !l.pid || !l.gate) {
		msb_guest_run_layout_clear(&l);
		return msb__error_nomem(err);
	}
	*out = l;
	return 0;
}

/* ---- the shim (14.10-14.12) ---------------------------------------------------- */

static const char *const py_keywords[] = {
	"False",   "None",     "True",	   "and",    "as",   "assert", "async",	 "await",
	"break",   "class",    "continue", "def",    "del",  "elif",   "else",	 "except",
	"finally", "for",      "from",	   "global", "if",   "import", "in",	 "is",
	"lambda",  "nonlocal", "not",	   "or",     "pass", "raise",  "return", "try",
	"while",   "with",     "yield",	   "match",  "case", "type",   "_",	 NULL,
};

/* Every global name the generated shim binds (a wrapper must not replace one). */
const char *const msb_hosttools__shim_globals[] = {
	"json",		"os",	  "time",   "HostToolError", "call",   "NAMES",
	"CALL_TIMEOUT", "_CALLS", "_claim", "_publish",	     "_await", NULL,
};

static bool ascii_identifier(const char *s)
{
	if (!s[0] || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_'))
			return false;
	return true;
}

/* A wrapper is emitted only for a name a program can spell as-is: an ASCII
 * identifier (so no NFKC-equivalent spelling can collide with another, 14.11),
 * not a keyword, not dunder, not a name the shim uses. */
bool msb_hosttools__spellable(const char *name)
{
	return ascii_identifier(name) && !in_list(py_keywords, name) &&
	       !in_list(msb_hosttools__shim_globals, name) && !(name[0] == '_' && name[1] == '_');
}

static const char shim_head[] =
	"# Generated by msb: the guest side of host-tool calls over exec.\n"
	"# This module is not a control - every gate is on the host. A program may\n"
	"# write request files itself and is served identically.\n"
	"import json\n"
	"import os\n"
	"import time\n"
	"\n"
	"_CALLS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "
	"\"" CALLS_DIR "\")\n";

static const char shim_body[] =
	"\n"
	"\n"
	"class HostToolError(Exception):\n"
	"    \"\"\"The host refused the call; str(error) is its sentence.\"\"\"\n"
	"\n"
	"\n"
	"def _claim():\n"
	"    n = 1\n"
	"    while True:\n"
	"        path = os.path.join(_CALLS, \"%04d.claim\" % n)\n"
	"        try:\n"
	"            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))\n"
	"            return n\n"
	"        except FileExistsError:\n"
	"            n += 1\n"
	"\n"
	"\n"
	"def _publish(n, request):\n"
	"    path = os.path.join(_CALLS, \"%04d.request.json\" % n)\n"
	"    with open(path + \".part\", \"w\", encoding=\"utf-8\") as f:\n"
	"        f.write(json.dumps(request, ensure_ascii=False, allow_nan=False))\n"
	"    os.rename(path + \".part\", path)\n"
	"\n"
	"\n"
	"def _await(n):\n"
	"    path = os.path.join(_CALLS, \"%04d.response.json\" % n)\n"
	"    deadline = time.monotonic() + CALL_TIMEOUT\n"
	"    pause = 0.0005\n"
	"    while True:\n"
	"        try:\n"
	"            with open(path, encoding=\"utf-8\") as f:\n"
	"                return json.loads(f.read())\n"
	"        except (FileNotFoundError, ValueError):\n"
	"            pass\n"
	"        if time.monotonic() > deadline:\n"
	"            raise HostToolError(\"Error: the host did not answer host-tool call %d in "
	"time\" % n)\n"
	"        time.sleep(pause)\n"
	"        pause = min(pause * 2, 0.05)\n"
	"\n"
	"\n"
	"def call(name, **arguments):\n"
	"    \"\"\"Call host tool `name`; returns its value or raises HostToolError.\"\"\"\n"
	"    n = _claim()\n"
	"    try:\n"
	"        _publish(n, {\"id\": n, \"name\": name, \"arguments\": arguments})\n"
	"    except BaseException:\n"
	"        _publish(n, {\"id\": n, \"abandoned\": True})\n"
	"        raise\n"
	"    answer = _await(n)\n"
	"    if \"refusal\" in answer:\n"
	"        raise HostToolError(answer[\"refusal\"])\n"
	"    return answer[\"value\"]\n";

static int py_string(msb_buf *b, const char *s)
{
	/* json_dumps of a string is a valid Python string literal. */
	json_t *j = json_string(s);
	char *t = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
	json_decref(j);
	if (!t)
		return -ENOMEM;
	int r = msb__buf_puts(b, t);
	free(t);
	return r;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int msb_host_tool_shim(const char *const *names, size_t n, double call_timeout, char **out,
		       msb_error **err)
{
	if (!out || (n && !names))
		return msb_error_set(err, MSB_E_VALUE, "host_tool_shim: NULL argument");
	int rc = msb__check_timeout(call_timeout, "call_timeout", err);
	if (rc < 0)
		return rc;
	_cleanup_free_ const char **sorted = calloc(n + 1, sizeof(char *));
	if (!sorted)
		return msb__error_nomem(err);
	for (size_t i = 0; i < n; i++) {
		if (!names[i])
			return msb_error_set(err, MSB_E_VALUE, "host_tool_shim: NULL name");
		sorted[i] = names[i];
	}
	qsort(sorted, n, sizeof(char *), cmp_str);
	msb_buf b = MSB_BUF_INIT;
	msb__buf_puts(&b, shim_head);
	msb__buf_printf(&b, "CALL_TIMEOUT = %.17g\nNAMES = (", call_timeout);
	for (size_t i = 0; i < n; i++) {
		if (py_string(&b, sorted[i]) < 0)
			b.oom = true;
		msb__buf_puts(&b, ", ");
	}
	msb__buf_puts(&b, ")\n");
	msb__buf_puts(&b, shim_body);
	for (size_t i = 0; i < n; i++) {
		if (!msb_hosttools__spellable(sorted[i]) ||
		    (i > 0 && !strcmp(sorted[i], sorted[i - 1])))
			continue;
		msb__buf_printf(&b,
				"\n\ndef %s(**arguments):\n"
				"    \"\"\"Convenience for call(%s, ...); grants nothing.\"\"\"\n"
				"    return call(\"%s\", **arguments)\n",
				sorted[i], sorted[i], sorted[i]);
	}
	char *s = msb__buf_steal_str(&b);
	if (!s)
		return msb__error_nomem(err);
	*out = s;
	return 0;
}

/* ---- the launcher (14.17, 14.32-14.34) -------------------------------------------- */

/* Single-quote for sh. */
static void sh_quote(msb_buf *b, const char *s)
{
	msb__buf_puts(b, "'");
	for (const char *p = s; *p; p++) {
		if (*p == '\'')
			msb__buf_puts(b, "'\\''");
		else
			msb__buf_append(b, p, 1);
	}
	msb__buf_puts(b, "'");
}

/* The helper runs detached (its own session where setsid exists) and starts
 * the program only once the host has created the gate. Arguments:
 * $1 transport dir, $2 program file, $3 interpreter, $4 gate polls. */
static const char helper_text[] = "t=$1; i=0\n"
				  "while [ ! -e \"$t/" GATE_FILE "\" ]; do\n"
				  "  i=$((i+1)); [ \"$i\" -gt \"$4\" ] && exit 0\n"
				  "  sleep 0.002 2>/dev/null || sleep 1\n"
				  "done\n"
				  "\"$3\" \"$t/$2\" >\"$t/" OUTPUT_FILE "\" 2>&1 </dev/null\n"
				  "rc=$?\n"
				  "echo \"$rc\" >\"$t/" EXIT_FILE ".part\" && mv -f \"$t/" EXIT_FILE
				  ".part\" \"$t/" EXIT_FILE "\"\n";

int msb_hosttools__launcher(const msb_guest_run_layout *l, const char *interpreter,
			    double gate_seconds, char **out)
{
	const char *program = strrchr(l->program, '/') + 1;
	long polls = (long)ceil(gate_seconds / 0.002);
	if (polls < 1)
		polls = 1;
	msb_buf b = MSB_BUF_INIT;
	msb__buf_puts(&b, "# Generated by msb: the host-tool-call launcher (docs/hosttools.md).\n"
			  "set -u\nrun=");
	sh_quote(&b, l->directory);
	msb__buf_puts(&b,
		      "\n"
		      "case \"$run\" in /*) ;; *) run=\"$(pwd -P)/$run\" || exit 125 ;; esac\n"
		      "t=\"$run/" MSB_RUN_TRANSPORT_DIRECTORY "\"\n"
		      "mkdir -p \"$run/" MSB_RUN_WORK_DIRECTORY "\" \"$t/" CALLS_DIR "\" && "
		      "cd \"$run/" MSB_RUN_WORK_DIRECTORY "\" || {\n"
		      "  echo \"launcher: cannot enter the work directory\" >&2; exit 126; }\n"
		      "rm -f \"$t/" EXIT_FILE "\" \"$t/" EXIT_FILE ".part\" \"$t/" GATE_FILE "\"\n"
		      /* 14.32: the shim's directory first; an inherited entry only when
		       * absolute, canonical and outside the run tree; globs literal. */
		      "keep=\nold=\"${PYTHONPATH-}\"\n"
		      "set -f; saved_ifs=$IFS; IFS=:\n"
		      "for e in $old; do\n"
		      "  case \"$e\" in /*) ;; *) continue ;; esac\n"
		      "  case \"$e\" in */./*|*/../*|*//*|*/.|*/..) continue ;; esac\n"
		      "  case \"$e\" in \"$run\"|\"$run\"/*) continue ;; esac\n"
		      "  keep=\"$keep:$e\"\n"
		      "done\n"
		      "IFS=$saved_ifs; set +f\n"
		      "PYTHONPATH=\"$t$keep\"\n"
		      "PYTHONNOUSERSITE=1\nPYTHONUNBUFFERED=1\n"
		      "export PYTHONPATH PYTHONNOUSERSITE PYTHONUNBUFFERED\n"
		      "helper=");
	sh_quote(&b, helper_text);
	msb__buf_puts(&b, "\nprogram=");
	sh_quote(&b, program);
	msb__buf_puts(&b, "\ninterp=");
	sh_quote(&b, interpreter);
	msb__buf_printf(&b, "\npolls=%ld\n", polls);
	msb__buf_puts(
		&b, "if command -v setsid >/dev/null 2>&1; then\n"
		    "  setsid sh -c \"$helper\" msb-run \"$t\" \"$program\" \"$interp\" \"$polls\" "
		    "</dev/null >/dev/null 2>&1 &\n"
		    "  pid=$!; grp=$pid\n"
		    "else\n"
		    "  sh -c \"$helper\" msb-run \"$t\" \"$program\" \"$interp\" \"$polls\" "
		    "</dev/null >/dev/null 2>&1 &\n"
		    "  pid=$!; grp=\n"
		    "fi\n"
		    "echo \"$pid\" >\"$t/" PID_FILE ".part\" && mv -f \"$t/" PID_FILE
		    ".part\" \"$t/" PID_FILE "\"\n"
		    "echo \"msb-receipt pid=$pid\"\n"
		    "[ -n \"$grp\" ] && echo \"msb-receipt pgid=$grp\"\n"
		    "echo \"msb-receipt end\"\n"
		    "exit 0\n");
	*out = msb__buf_steal_str(&b);
	return *out ? 0 : -ENOMEM;
}
