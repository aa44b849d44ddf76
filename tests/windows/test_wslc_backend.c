/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `wslc` backend on Windows, end to end through its real code (the row
 * of the backend-type table, the engine core, the CreateProcessW runner;
 * issue 21, checklist 21.10, 21.18, 21.26-21.30) against wslc.exe, our
 * recording stand-in (wslc_standin.c), which logs each call's arguments and
 * answers from a script keyed by the call's leading arguments.
 */
#include <windows.h>

#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include <msb/backend.h>
#include <msb/msb.h>

static char standin[MAX_PATH], dir[MAX_PATH], logpath[MAX_PATH], script[MAX_PATH], saved[MAX_PATH];

static void setup(void)
{
	DWORD n = GetModuleFileNameA(NULL, standin, sizeof(standin));
	cr_assert(n > 0 && n < sizeof(standin));
	char *slash = strrchr(standin, '\\');
	cr_assert_not_null(slash);
	snprintf(slash + 1, sizeof(standin) - (size_t)(slash + 1 - standin), "wslc.exe");
	char tmp[MAX_PATH];
	cr_assert(GetTempPathA(sizeof(tmp), tmp) > 0);
	snprintf(dir, sizeof(dir), "%smsb-wslcb-%lu", tmp, (unsigned long)GetCurrentProcessId());
	CreateDirectoryA(dir, NULL);
	snprintf(logpath, sizeof(logpath), "%s\\log", dir);
	snprintf(script, sizeof(script), "%s\\script", dir);
	snprintf(saved, sizeof(saved), "%s\\stdin", dir);
	SetEnvironmentVariableA("MSB_STANDIN_RECORD", NULL);
	SetEnvironmentVariableA("MSB_STANDIN_LOG", logpath);
	SetEnvironmentVariableA("MSB_STANDIN_SCRIPT", script);
	SetEnvironmentVariableA("MSB_AGENT", NULL);
}

static void teardown(void)
{
	DeleteFileA(logpath);
	DeleteFileA(script);
	DeleteFileA(saved);
	RemoveDirectoryA(dir);
}

TestSuite(wslc_backend, .init = setup, .fini = teardown);

#define NAME "maf-sandbox-wslc-d510b9b10aa8"
#define LABELS                                                                                     \
	"-l maf-sandbox.scope=s -l maf-sandbox.thread=t -l maf-sandbox.agent=a -l "                \
	"maf-sandbox.kind=k"
#define LISTED                                                                                     \
	"{\"ID\":\"cid123\",\"Names\":\"" NAME "\",\"Labels\":\"maf-sandbox.scope=s,"              \
	"maf-sandbox.thread=t,maf-sandbox.agent=a,maf-sandbox.kind=k\",\"State\":\"running\"}"

/* The script; "SAVED" in it becomes the path the stand-in saves stdin to. */
static void write_script(void)
{
	FILE *f = fopen(script, "wb");
	cr_assert_not_null(f);
	fprintf(f,
		"when container list -a --format json --filter name=\n"
		"when container list -a --format json --filter label=\n"
		"out " LISTED "\n"
		"when container run -d --name\n"
		"out cid123\n"
		"when container exec --user 0 cid123 mkdir\n"
		"when container exec -w /maf-sandbox/work cid123 sh -c echo hi\n"
		"out hi from wslc\n"
		"err a warning\n"
		"exit 3\n"
		"when container cp cid123:/maf-sandbox/work/r.txt -\n"
		"tar-file maf-sandbox/work/r.txt hello\n"
		"when container cp cid123:/maf-sandbox/work/a/b.txt -\n"
		"err Error: ERROR_PATH_NOT_FOUND\n"
		"exit 1\n"
		"when container cp cid123:/maf-sandbox/work/a -\n"
		"err Error: ERROR_PATH_NOT_FOUND\n"
		"exit 1\n"
		"when container cp cid123:/maf-sandbox/work -\n"
		"tar-dir maf-sandbox/work\n"
		"when container cp cid123:/maf-sandbox -\n"
		"tar-dir maf-sandbox\n"
		"when container cp - cid123:/\n"
		"save %s\n"
		"when container remove -f " NAME "\n"
		"out cid123\n",
		saved);
	fclose(f);
}

/* The calls the stand-in logged, one a line. */
static char *calls(void)
{
	FILE *f = fopen(logpath, "rb");
	cr_assert_not_null(f);
	static char buf[16384];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static msb_backend *backend(void)
{
	char json[2 * MAX_PATH + 128], esc[2 * MAX_PATH];
	size_t j = 0;
	for (const char *p = standin; *p && j + 2 < sizeof(esc); p++) {
		if (*p == '\\')
			esc[j++] = '\\';
		esc[j++] = *p;
	}
	esc[j] = '\0';
	snprintf(json, sizeof(json), "{\"type\":\"wslc\",\"wslc_path\":\"%s\",\"image\":\"img\"}",
		 esc);
	msb_backend *b = NULL;
	msb_error *err = NULL;
	int r = msb_backend_from_json(json, strlen(json), &b, &err);
	cr_assert_eq(r, 0, "%s", msb_error_message(err));
	return b;
}

static msb_spec *spec_k(void)
{
	msb_spec_builder *sb = msb_spec_builder_new("k");
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(sb, &spec, NULL), 0);
	msb_spec_builder_free(sb);
	return spec;
}

static const msb_key KEY = {"s", "t", "a", NULL};

Test(wslc_backend, acquire_exec_files_dispose_through_wslc_exe_21_10_21_27)
{
	write_script();
	msb_backend *b = backend();
	msb_spec *spec = spec_k();
	msb_sandbox *sb = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_backend_acquire(b, &KEY, spec, &sb, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert_str_eq(msb_sandbox_instance_id(sb), "cid123");
	cr_assert_str_eq(calls(), "container list -a --format json --filter name=" NAME "\n"
				  "container run -d --name " NAME " --network none " LABELS
				  " img sleep infinity\n"
				  "container exec --user 0 cid123 mkdir -p -- /maf-sandbox/work\n");
	DeleteFileA(logpath);

	/* exec: the child's output, its exit code, its stderr apart */
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = "echo hi";
	msb_exec_result res = {0};
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &err), 0, "%s", msb_error_message(err));
	cr_assert_eq(res.exit_code, 3);
	cr_assert_eq(res.stdout_len, strlen("hi from wslc"));
	cr_assert_eq(memcmp(res.stdout_bytes, "hi from wslc", res.stdout_len), 0);
	cr_assert_eq(res.stderr_len, strlen("a warning"));
	msb_exec_result_clear(&res);
	cr_assert_str_eq(calls(), "container exec -w /maf-sandbox/work cid123 sh -c echo hi\n");
	DeleteFileA(logpath);

	/* read: the leaf's header judged (the stand-in killed once it was
	 * read), then the body */
	uint8_t *data = NULL;
	size_t len = 0;
	cr_assert_eq(msb_sandbox_read_file(sb, "r.txt", NULL, 1024, &data, &len, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert_eq(len, 5);
	cr_assert_eq(memcmp(data, "hello", 5), 0);
	free(data);
	/* a file over the cap is refused on its header */
	cr_assert_eq(msb_sandbox_read_file(sb, "r.txt", NULL, 3, &data, &len, &err),
		     MSB_E_TRANSFER_CAP_EXCEEDED);
	msb_error_free(err);
	err = NULL;
	DeleteFileA(logpath);

	/* write: the walk from the base, then one tar entry on stdin */
	cr_assert_eq(msb_sandbox_write_file(sb, "a/b.txt", (const uint8_t *)"hi", 2, NULL, &err), 0,
		     "%s", msb_error_message(err));
	cr_assert_str_eq(calls(), "container cp cid123:/maf-sandbox -\n"
				  "container cp cid123:/maf-sandbox/work -\n"
				  "container cp cid123:/maf-sandbox/work/a -\n"
				  "container cp cid123:/maf-sandbox/work/a/b.txt -\n"
				  "container cp - cid123:/\n");
	FILE *f = fopen(saved, "rb");
	cr_assert_not_null(f);
	uint8_t tar[2048];
	size_t n = fread(tar, 1, sizeof(tar), f);
	fclose(f);
	cr_assert_eq(n, 2048); /* header, the body's block, two zero blocks */
	cr_assert_str_eq((const char *)tar, "maf-sandbox/work/a/b.txt");
	cr_assert_eq(tar[156], '0');
	cr_assert_eq(memcmp(tar + 512, "hi", 2), 0);
	DeleteFileA(logpath);

	/* dispose: selected by labels read back, removed, never stopped */
	msb_sandbox_free(sb);
	msb_disposal_failure *fail = NULL;
	cr_assert_eq(msb_backend_dispose(b, &KEY, NULL, NULL, &fail, &err), 0);
	cr_assert_null(fail);
	cr_assert_str_eq(calls(),
			 "container list -a --format json --filter label=maf-sandbox.scope=s "
			 "--filter label=maf-sandbox.thread=t --filter label=maf-sandbox.agent=a\n"
			 "container remove -f " NAME "\n");
	msb_spec_unref(spec);
	msb_backend_unref(b);
}

Test(wslc_backend, doctor_and_row_on_windows_21_1)
{
	/* The row is in the Windows table: its type is found by name. */
	const msb_backend_type *t = msb_backend_type_find("wslc");
	cr_assert_not_null(t);
	cr_assert_str_eq(t->name, "wslc");
	cr_assert_null(msb_backend_type_find("docker"), "docker is Linux only (docs/windows.md)");
}
