/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Outputs end to end on the real `ns` backend (checklist 12.7, 12.12, 12.16,
 * 12.17, 12.22, 12.26-12.29; 11.1-11.4): a program in the sandbox writes a
 * PNG and a CSV and both land under a filesystem sink's root with the bytes
 * and SHA-256 the guest computed; a 10,000-file flood stops at max_files
 * after max_files + 1 stats; a file grown between stat and read is refused;
 * the shell road moves files both ways. Needs root, msb-shim and msb-agent
 * (env MSB_SHIM, MSB_AGENT). Each test has its own state root and sink root
 * and checks that disposal left nothing behind.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include <msb/msb.h>
#include <msb/ns.h>

#include "../unit/spy_sandbox.h"
#include "util/fs.h"
#include "util/sha256.h"

#define CAPS (MSB_CAP_EXEC | MSB_CAP_FILES_IN | MSB_CAP_FILES_OUT | MSB_CAP_FILES_LIST)

static char root[64];	   /* the private state root */
static char sink_root[64]; /* where artifacts land */
static msb_backend *backend;
static msb_sandbox *sb;
static const char *thread_id = "outputs";

static void setup(void)
{
	snprintf(root, sizeof(root), "/tmp/msbo-XXXXXX");
	cr_assert(mkdtemp(root));
	snprintf(sink_root, sizeof(sink_root), "/tmp/msbo-sink-XXXXXX");
	cr_assert(mkdtemp(sink_root));
	msb_ns_options o = MSB_NS_OPTIONS_INIT;
	o.state_root = root;
	msb_error *err = NULL;
	cr_assert_eq(msb_ns_backend_new(&o, &backend, &err), 0, "%s", msb_error_message(err));
	msb_spec_builder *b = msb_spec_builder_new("ns-outputs");
	msb_spec_builder_set_requires(b, CAPS);
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(b, &spec, &err), 0);
	msb_spec_builder_free(b);
	msb_key key = {.scope = "test", .thread_id = thread_id, .agent_dir = "/agent"};
	int r = msb_backend_acquire(backend, &key, spec, &sb, &err);
	msb_spec_unref(spec);
	if (r < 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", msb_error_message(err));
		msb_error_free(err);
		msb_backend_unref(backend);
		backend = NULL;
		msb__rm_rf(root);
		msb__rm_rf(sink_root);
		cr_assert_fail("acquire: %s", msg);
	}
}

static void teardown(void)
{
	msb_sandbox_free(sb);
	sb = NULL;
	bool clean = true;
	if (backend) {
		msb_scope_purge purge = {0};
		msb_error *err = NULL;
		int r = msb_backend_dispose_scope(backend, "test", thread_id, &purge, &err);
		clean = r == 0 && purge.undisposed == 0;
		msb_error_free(err);
		msb_backend_unref(backend);
		backend = NULL;
		char ns[96];
		snprintf(ns, sizeof(ns), "%s/ns", root);
		DIR *d = opendir(ns);
		for (struct dirent *de; d && (de = readdir(d));)
			if (strncmp(de->d_name, "msb-", 4) == 0)
				clean = false;
		if (d)
			closedir(d);
	}
	msb__rm_rf(root);
	msb__rm_rf(sink_root);
	cr_assert(clean, "disposal left something behind under %s", root);
}

TestSuite(ns_outputs, .init = setup, .fini = teardown, .timeout = 300);

/* Run a shell command in the guest; its stdout (static buffer). */
static const char *sh(const char *cmd)
{
	static char out[8192];
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.shell = cmd;
	req.timeout = 120;
	msb_exec_result res = {0};
	msb_error *err = NULL;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &err), 0, "exec: %s",
		     err ? msb_error_message(err) : "");
	cr_assert_eq(res.exit_code, 0, "exec `%s` exited %d: %s", cmd, res.exit_code,
		     (char *)res.stderr_bytes);
	snprintf(out, sizeof(out), "%s", (char *)res.stdout_bytes);
	msb_exec_result_clear(&res);
	return out;
}

static msb_spec *spec_of(const msb_declared_output *outs, size_t n, msb_transfer_limits caps,
			 bool call_time)
{
	msb_spec_builder *b = msb_spec_builder_new("ns-outputs");
	msb_spec_builder_set_requires(b, CAPS);
	for (size_t i = 0; i < n; i++)
		msb_spec_builder_add_declared_output(b, &outs[i]);
	msb_spec_builder_set_files_out(b, caps);
	msb_spec_builder_set_outputs_named_at_call_time(b, call_time);
	msb_spec *s = NULL;
	msb_error *err = NULL;
	cr_assert_eq(msb_spec_build(b, &s, &err), 0, "%s", err ? msb_error_message(err) : "");
	msb_spec_builder_free(b);
	return s;
}

static msb_output_sink *fs_sink(void)
{
	msb_output_sink *s = NULL;
	msb_error *e = NULL;
	cr_assert_eq(msb_fs_sink_new(sink_root, NULL, &s, &e), 0, "%s",
		     e ? msb_error_message(e) : "");
	return s;
}

static uint8_t *host_file(const char *rel, size_t *len)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", sink_root, rel);
	char *d = NULL;
	int dfd = open(sink_root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert(dfd >= 0);
	int r = msb__read_file_at(dfd, rel, 1 << 24, &d, len);
	close(dfd);
	cr_assert_eq(r, 0, "%s: %d", p, r);
	return (uint8_t *)d;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The guest program: a 32x32 RGB PNG (zlib, CRCs) and a CSV, each file's
 * SHA-256 printed as "<name> <hex>". */
static const char PROGRAM[] =
	"python3 - <<'EOF'\n"
	"import hashlib, struct, zlib, os\n"
	"def chunk(t, d):\n"
	"    c = struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)\n"
	"    return struct.pack('>I', len(d)) + t + d + c\n"
	"w = h = 32\n"
	"raw = b''.join(b'\\x00' + b''.join(bytes((x * 8, y * 8, 128)) for x in range(w))"
	" for y in range(h))\n"
	"png = (b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, "
	"0,"
	" 0))\n"
	"       + chunk(b'IDAT', zlib.compress(raw, 9)) + chunk(b'IEND', b''))\n"
	"os.makedirs('plots', exist_ok=True)\n"
	"open('plots/chart.png', 'wb').write(png)\n"
	"csv = 'x,y\\n' + ''.join('%d,%d\\n' % (i, i * i) for i in range(100))\n"
	"open('table.csv', 'w').write(csv)\n"
	"for n in ('plots/chart.png', 'table.csv'):\n"
	"    print(n, hashlib.sha256(open(n, 'rb').read()).hexdigest())\n"
	"EOF\n";

Test(ns_outputs, image_and_csv_land_with_their_bytes_and_sha256)
{
	const char *out = sh(PROGRAM);
	char png_hex[65] = {0}, csv_hex[65] = {0};
	cr_assert_eq(sscanf(out, "plots/chart.png %64s table.csv %64s", png_hex, csv_hex), 2,
		     "guest said: %s", out);
	msb_declared_output outs[2] = {MSB_DECLARED_OUTPUT_INIT, MSB_DECLARED_OUTPUT_INIT};
	outs[0].path = "plots/chart.png";
	outs[0].media_type = "image/png";
	outs[1].path = "table.csv";
	outs[1].media_type = "text/csv";
	outs[1].name = "reports/squares.csv";
	msb_spec *spec = spec_of(outs, 2, MSB_DEFAULT_TRANSFER_LIMITS, false);
	msb_output_sink *sink = fs_sink();
	msb_collect_options o = MSB_COLLECT_OPTIONS_INIT;
	o.sink = sink;
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	msb_error *e = NULL;
	cr_assert_eq(msb_collect_outputs(sb, spec, &o, &l, &n, &e), 0, "%s",
		     e ? msb_error_message(e) : "");
	cr_assert_eq(n, 2);
	cr_assert_str_eq(l[0].name, "plots/chart.png");
	cr_assert_str_eq(l[1].name, "reports/squares.csv");
	cr_assert_str_eq(l[0].media_type, "image/png");
	cr_assert_str_eq(l[0].sha256, png_hex);
	cr_assert_str_eq(l[1].sha256, csv_hex);
	/* What is on the host disk hashes to what the guest computed. */
	size_t len = 0;
	uint8_t *png = host_file("plots/chart.png", &len);
	char hex[65];
	msb__sha256_hex(png, len, hex);
	cr_assert_str_eq(hex, png_hex);
	cr_assert_eq(memcmp(png, "\x89PNG\r\n\x1a\n", 8), 0);
	cr_assert_eq(len, l[0].size_bytes);
	free(png);
	uint8_t *csv = host_file("reports/squares.csv", &len);
	msb__sha256_hex(csv, len, hex);
	cr_assert_str_eq(hex, csv_hex);
	cr_assert_eq(memcmp(csv, "x,y\n0,0\n1,1\n", 12), 0);
	free(csv);
	char want[256];
	snprintf(want, sizeof(want), "reports/squares.csv (%" PRIu64 " bytes)", l[1].size_bytes);
	cr_assert_str_eq(l[1].display, want);
	cr_assert(strncmp(l[0].handle, "/", 1) == 0 && strstr(l[0].handle, "/plots/chart.png"));
	/* Collected again: the names are occupied now (12.27). */
	msb_landed_artifacts_free(l, n);
	msb_error_free(e);
	e = NULL;
	cr_assert_eq(msb_collect_outputs(sb, spec, &o, &l, &n, &e), MSB_E_LANDING_EXISTS);
	msb_error_free(e);
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
}

Test(ns_outputs, a_10000_file_flood_stops_at_max_files)
{
	sh("mkdir flood && cd flood && python3 -c \"[open('f%05d' % i, 'w').write('x') for i in "
	   "range(10000)]\" && ls | wc -l");
	enum { FLOOD = 10000 };
	msb_declared_output *outs = calloc(FLOOD, sizeof(*outs));
	char(*names)[16] = calloc(FLOOD, sizeof(*names));
	for (size_t i = 0; i < FLOOD; i++) {
		snprintf(names[i], sizeof(names[i]), "flood/f%05zu", i);
		outs[i] = (msb_declared_output)MSB_DECLARED_OUTPUT_INIT;
		outs[i].path = names[i];
	}
	msb_spec *spec = spec_of(NULL, 0, MSB_DEFAULT_TRANSFER_LIMITS, true);
	struct spy spy = {.inner = sb};
	msb_sandbox *spied = NULL;
	cr_assert_eq(spy_handle(&spy, &spied), 0);
	msb_output_sink *sink = fs_sink();
	msb_collect_options o = MSB_COLLECT_OPTIONS_INIT;
	o.sink = sink;
	o.outputs = outs;
	o.n_outputs = FLOOD;
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	msb_error *e = NULL;
	double t0 = now_ms();
	cr_assert_eq(msb_collect_outputs(spied, spec, &o, &l, &n, &e), MSB_E_TRANSFER_CAP_EXCEEDED);
	double took = now_ms() - t0;
	const char *cap = NULL, *file = NULL;
	cr_assert(msb_error_cap(e, &cap, &file));
	cr_assert_str_eq(cap, "max_files");
	cr_assert_str_eq(file, "flood/f00064"); /* the 65th: default max_files is 64 */
	cr_assert_eq(spy.stats, 65, "stat-ed %d files", spy.stats);
	cr_assert_eq(spy.reads, 0);
	cr_assert_eq(rmdir(sink_root), 0, "something landed"); /* empty */
	cr_assert_eq(mkdir(sink_root, 0700), 0);
	fprintf(stderr, "ns_outputs: 10000-file flood refused after %d stats in %.1f ms\n",
		spy.stats, took);
	msb_error_free(e);
	msb_sandbox_free(spied);
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
	free(outs);
	free(names);
}

Test(ns_outputs, a_file_grown_between_stat_and_read_is_refused)
{
	sh("printf 0123456789 > grow.txt && printf ok > first.txt");
	msb_declared_output outs[2] = {MSB_DECLARED_OUTPUT_INIT, MSB_DECLARED_OUTPUT_INIT};
	outs[0].path = "first.txt";
	outs[1].path = "grow.txt";
	msb_spec *spec = spec_of(outs, 2, MSB_DEFAULT_TRANSFER_LIMITS, false);
	/* Right after the stat of grow.txt the file grows to 32 bytes, through
	 * the real file plane. */
	struct spy spy = {.inner = sb, .grow_rel = "grow.txt", .grow_path = "grow.txt"};
	msb_sandbox *spied = NULL;
	cr_assert_eq(spy_handle(&spy, &spied), 0);
	msb_output_sink *sink = fs_sink();
	msb_collect_options o = MSB_COLLECT_OPTIONS_INIT;
	o.sink = sink;
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	msb_error *e = NULL;
	cr_assert_eq(msb_collect_outputs(spied, spec, &o, &l, &n, &e), MSB_E_TRANSFER_CAP_EXCEEDED);
	cr_assert(strstr(msb_error_message(e), "grew"), "%s", msb_error_message(e));
	const char *cap = NULL, *file = NULL;
	cr_assert(msb_error_cap(e, &cap, &file));
	cr_assert_str_eq(file, "grow.txt");
	msb_error_free(e);
	/* Nothing delivered, not even the first output (12.7). */
	cr_assert_eq(rmdir(sink_root), 0, "something landed");
	cr_assert_eq(mkdir(sink_root, 0700), 0);
	cr_assert_str_eq(sh("wc -c < grow.txt"), "32\n");
	msb_sandbox_free(spied);
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
}

Test(ns_outputs, symlinked_output_is_not_regular_and_missing_is_missing)
{
	sh("ln -s /etc/hostname link.txt");
	msb_declared_output out = MSB_DECLARED_OUTPUT_INIT;
	out.path = "link.txt";
	msb_spec *spec = spec_of(&out, 1, MSB_DEFAULT_TRANSFER_LIMITS, false);
	msb_output_sink *sink = fs_sink();
	msb_collect_options o = MSB_COLLECT_OPTIONS_INIT;
	o.sink = sink;
	msb_landed_artifact *l = NULL;
	size_t n = 0;
	msb_error *e = NULL;
	cr_assert_eq(msb_collect_outputs(sb, spec, &o, &l, &n, &e), MSB_E_OUTPUT_NOT_REGULAR);
	msb_error_free(e);
	msb_spec_unref(spec);
	out.path = "nope.txt";
	spec = spec_of(&out, 1, MSB_DEFAULT_TRANSFER_LIMITS, false);
	e = NULL;
	cr_assert_eq(msb_collect_outputs(sb, spec, &o, &l, &n, &e), MSB_E_OUTPUT_MISSING);
	msb_error_free(e);
	msb_output_sink_free(sink);
	msb_spec_unref(spec);
}

Test(ns_outputs, shell_road_round_trip_and_refusals)
{
	size_t len = 300000;
	uint8_t *data = malloc(len);
	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 131 + 7);
	msb_exec_transfer_options o = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	o.call_id = "0123456789ab";
	o.timeout = 60;
	msb_error *e = NULL;
	double t0 = now_ms();
	cr_assert_eq(msb_write_file_over_exec(sb, "road/in/blob.bin", data, len, &o, &e), 0, "%s",
		     e ? msb_error_message(e) : "");
	double w_ms = now_ms() - t0;
	/* Landed whole, no sibling left. */
	cr_assert_str_eq(sh("ls -A road/in"), "blob.bin\n");
	uint8_t *back = NULL;
	size_t back_len = 0;
	cr_assert_eq(msb_sandbox_read_file(sb, "road/in/blob.bin", NULL, len, &back, &back_len, &e),
		     0);
	cr_assert_eq(back_len, len);
	cr_assert_eq(memcmp(back, data, len), 0);
	free(back);
	/* And read back over exec. */
	o.max_bytes = len;
	t0 = now_ms();
	cr_assert_eq(msb_read_file_over_exec(sb, "road/in/blob.bin", &o, &back, &back_len, &e), 0,
		     "%s", e ? msb_error_message(e) : "");
	double r_ms = now_ms() - t0;
	cr_assert_eq(back_len, len);
	cr_assert_eq(memcmp(back, data, len), 0);
	free(back);
	fprintf(stderr, "ns_outputs: shell road 300 kB write %.1f ms, read %.1f ms\n", w_ms, r_ms);
	/* Refusals from the real shell. */
	int refusal = -1;
	cr_assert_eq(msb_read_file_over_exec(sb, "road", &o, &back, &back_len, &e),
		     MSB_E_FILE_REFUSED);
	cr_assert(msb_error_file_refusal(e, &refusal));
	cr_assert_eq(refusal, MSB_FILE_REFUSAL_IS_DIRECTORY);
	msb_error_free(e);
	e = NULL;
	cr_assert_eq(msb_read_file_over_exec(sb, "road/none", &o, &back, &back_len, &e),
		     MSB_E_FILE_REFUSED);
	cr_assert(msb_error_file_refusal(e, &refusal));
	cr_assert_eq(refusal, MSB_FILE_REFUSAL_NOT_FOUND);
	msb_error_free(e);
	e = NULL;
	o.max_bytes = 1000;
	cr_assert_eq(msb_read_file_over_exec(sb, "road/in/blob.bin", &o, &back, &back_len, &e),
		     MSB_E_TRANSFER_CAP_EXCEEDED);
	msb_error_free(e);
	free(data);
}

/* 11.4 on the real shell: `test -e` is false behind an unsearchable directory
 * (guest root holds no capabilities, so mode 000 stops it too), and the
 * probe's open tells that apart from an absent file. */
Test(ns_outputs, shell_road_permission_denied_is_not_not_found)
{
	sh("mkdir locked && echo s > locked/f && chmod 000 locked");
	msb_exec_transfer_options o = MSB_EXEC_TRANSFER_OPTIONS_INIT;
	uint8_t *d = NULL;
	size_t len = 0;
	msb_error *e = NULL;
	int refusal = -1;
	cr_assert_eq(msb_read_file_over_exec(sb, "locked/f", &o, &d, &len, &e), MSB_E_FILE_REFUSED,
		     "%s", e ? msb_error_message(e) : "");
	cr_assert(msb_error_file_refusal(e, &refusal));
	cr_assert_eq(refusal, MSB_FILE_REFUSAL_PERMISSION_DENIED, "%s", msb_error_message(e));
	msb_error_free(e);
	e = NULL;
	cr_assert_eq(msb_read_file_over_exec(sb, "absent/f", &o, &d, &len, &e), MSB_E_FILE_REFUSED);
	cr_assert(msb_error_file_refusal(e, &refusal));
	cr_assert_eq(refusal, MSB_FILE_REFUSAL_NOT_FOUND);
	msb_error_free(e);
	e = NULL;
	/* Writing there is refused the same way, and nothing lands. */
	cr_assert_eq(msb_write_file_over_exec(sb, "locked/g", (const uint8_t *)"x", 1, &o, &e),
		     MSB_E_FILE_REFUSED);
	cr_assert(msb_error_file_refusal(e, &refusal));
	cr_assert_eq(refusal, MSB_FILE_REFUSAL_PERMISSION_DENIED, "%s", msb_error_message(e));
	msb_error_free(e);
	sh("chmod 755 locked");
	cr_assert_str_eq(sh("ls -A locked"), "f\n");
}
