/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine core and the wslc transport (checklist 21.1-21.32): names and
 * label digests, the tar reader's header-time refusals, and the exact argv
 * of the CLI contract through a recording runner. The real engine is in
 * tests/e2e/test_engine.py; the POSIX runner in test_wslc_runner.c. Portable:
 * the Windows build runs it too (tests/windows).
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include <msb/engine.h>
#include <msb/msb.h>
#include <msb/observer.h>

#include "backends/engine/wslc.h"

/* ---- names and labels (21.13-21.17) --------------------------------------------- */

Test(engine, container_name_from_the_key_21_13)
{
	msb_key k = {"s", "t", "a", NULL};
	char *n = msb_engine__container_name(MSB_WSLC_NAME_PREFIX, &k, "k", "");
	/* "maf-sandbox-wslc-" + sha256("s|t|a|k")[:12] */
	cr_assert_str_eq(n, "maf-sandbox-wslc-d510b9b10aa8");
	char *n2 = msb_engine__container_name(MSB_WSLC_NAME_PREFIX, &k, "k2", "");
	cr_assert_str_eq(n2, "maf-sandbox-wslc-0b6c276a2130"); /* the kind changes it */
	msb_key absent = {"scope", NULL, NULL, NULL};
	char *n3 = msb_engine__container_name(MSB_WSLC_NAME_PREFIX, &absent, "kind", "");
	cr_assert_str_eq(n3, "maf-sandbox-wslc-093a8b5b851b"); /* NULL fields hash as "" */
	char *n4 = msb_engine__container_name(MSB_WSLC_NAME_PREFIX, &k, "k", "allow:a,b");
	cr_assert_str_eq(n4, "maf-sandbox-wslc-12fbf9598345"); /* 21.14 */
	free(n);
	free(n2);
	free(n3);
	free(n4);
}

Test(engine, egress_id_21_14)
{
	msb_spec_builder *b = msb_spec_builder_new("k");
	msb_spec_builder_set_egress(b, MSB_EGRESS_ALLOWLIST);
	msb_spec_builder_add_egress_host(b, "b");
	msb_spec_builder_add_egress_host(b, "a");
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(b, &spec, NULL), 0);
	msb_spec_builder_free(b);
	char *with = msb_engine__egress_id(spec, true);
	char *without = msb_engine__egress_id(spec, false);
	cr_assert_str_eq(with, "allow:a,b");
	cr_assert_str_eq(without, "");
	free(with);
	free(without);
	msb_spec_unref(spec);
}

Test(engine, label_digest_21_17)
{
	char out[ENGINE_LABEL_VALUE_SIZE];
	msb_engine__label_value("tenant-1", out);
	cr_assert_str_eq(out, "tenant-1");
	char a64[65];
	memset(a64, 'a', 64);
	a64[64] = '\0';
	msb_engine__label_value(a64, out);
	cr_assert_str_eq(out, "sha256-ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5");
	cr_assert_eq(strlen(out), 55);
	msb_engine__label_value(a64 + 1, out); /* 63 characters pass */
	cr_assert_str_eq(out, a64 + 1);
	msb_engine__label_value("a b", out);
	cr_assert_str_eq(out, "sha256-c8687a08aa5d6ed2044328fa6a697ab8e96dc34291e8c203");
	/* A value shaped like a digest is digested again: never ambiguous. */
	msb_engine__label_value("sha256-000000000000000000000000000000000000000000000000", out);
	cr_assert_str_eq(out, "sha256-2be35b7d659da339cb0e89536189ee5175c9831a63242555");
	msb_engine__label_value("", out);
	cr_assert(strncmp(out, "sha256-", 7) == 0);
}

/* msb ls: the listing's state, image and creation time, in the forms the
 * Engine API, the docker CLI and wslc print (engine_list.c). */
Test(engine, listing_fields)
{
	const int64_t t = 1767323045; /* 2026-01-02 03:04:05 UTC */
	static const struct {
		const char *text;
		int64_t want;
	} cases[] = {
		{"2026-01-02 03:04:05 +0000 UTC", t}, /* docker ps --format json */
		{"2026-01-02T03:04:05Z", t},
		{"2026-01-02T03:04:05.123456789Z", t},
		{"2026-01-02T05:04:05+02:00", t},
		{"2026-01-02 01:04:05 -0200", t},
		{"2026-01-02T03:04:05", t}, /* no offset: UTC */
		{"2026-13-02T03:04:05Z", 0},
		{"2 hours ago", 0},
		{"", 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		engine_container c = {0};
		cr_assert_eq(msb_engine__container_fields(&c, NULL, NULL, 0, cases[i].text), 0);
		cr_assert_eq(c.created_s, cases[i].want, "%s: %lld", cases[i].text,
			     (long long)c.created_s);
		cr_assert_null(c.image);
		cr_assert_eq(c.state, ENGINE_ABSENT);
	}
	engine_container c = {0};
	cr_assert_eq(
		msb_engine__container_fields(&c, "python:3", "Running", 42, "2026-01-02T03:04:05Z"),
		0);
	cr_assert_str_eq(c.image, "python:3");
	cr_assert_eq(c.state, ENGINE_RUNNING);
	cr_assert_eq(c.created_s, 42); /* seconds win over the text */
	free(c.image);
	engine_container d = {0};
	cr_assert_eq(msb_engine__container_fields(&d, "", "exited", 0, NULL), 0);
	cr_assert_null(d.image);
	cr_assert_eq(d.state, ENGINE_STOPPED);
	cr_assert_eq(d.created_s, 0);
}

Test(engine, labels_21_16)
{
	msb_key k = {"s", "long thread id with spaces", NULL, NULL};
	msb_spec_builder *b = msb_spec_builder_new("kind");
	msb_spec_builder_set_label(b, "tenant", "t-1");
	msb_spec *spec = NULL;
	cr_assert_eq(msb_spec_build(b, &spec, NULL), 0);
	msb_spec_builder_free(b);
	char **labels = NULL;
	cr_assert_eq(msb_engine__labels(&k, "kind", spec, &labels, NULL), 0);
	cr_assert_str_eq(labels[0], "maf-sandbox.scope=s");
	cr_assert_str_eq(
		labels[1],
		/* digested, not truncated */
		"maf-sandbox.thread=sha256-573593de420747bac9c649bc17594f557641fdff89a9cd3d");
	cr_assert_str_eq(labels[2], "maf-sandbox.kind=kind"); /* no agent label: NULL */
	cr_assert_str_eq(labels[3], "maf-sandbox.label.tenant=t-1");
	cr_assert_null(labels[4]);
	msb_strv_free(labels);
	msb_spec_unref(spec);
}

static void fix_checksum(uint8_t *h)
{
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int j = 0; j < 512; j++)
		sum += h[j];
	snprintf((char *)h + 148, 8, "%06o", sum);
}

static void dir_header(uint8_t *h, const char *name)
{
	msb_buf b = MSB_BUF_INIT;
	cr_assert_eq(msb_engine__tar_head(name, 0, &b, NULL), 0);
	memcpy(h, b.data, 512);
	h[156] = '5';
	fix_checksum(h);
	msb__buf_free(&b);
}

/* ---- tar (22.7, 21.27) ------------------------------------------------------------- */

struct hdr_seen {
	engine_tar_header h;
	int calls;
	uint64_t max;
};

static int on_hdr(void *ud, const engine_tar_header *h, msb_error **err)
{
	struct hdr_seen *s = ud;
	s->h = *h;
	s->calls++;
	return msb_engine__tar_check(h, "/w/f", s->max, err);
}

static void roundtrip(const char *name, size_t len)
{
	uint8_t *data = malloc(len + 1);
	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 7);
	msb_buf tar = MSB_BUF_INIT;
	cr_assert_eq(msb_engine__tar_one(name, data, len, &tar, NULL), 0);
	cr_assert_eq(tar.len % 512, 0);
	struct hdr_seen s = {.max = len};
	engine_tar_reader r;
	msb_engine__tar_reader_init(&r, on_hdr, &s);
	/* Fed a byte at a time: the pieces an engine sends are arbitrary. */
	for (size_t i = 0; i < tar.len && !r.done; i++)
		cr_assert_eq(msb_engine__tar_feed(&r, tar.data + i, 1, NULL), 0);
	cr_assert(r.done);
	cr_assert_eq(s.calls, 1);
	cr_assert_str_eq(s.h.name, name);
	cr_assert_eq(s.h.size, len);
	cr_assert_eq(memcmp(r.body, data, len), 0);
	msb_engine__tar_reader_clear(&r);
	msb__buf_free(&tar);
	free(data);
}

Test(engine, tar_roundtrip)
{
	roundtrip("w/a/b.txt", 3);
	roundtrip("w/a/b.txt", 0);
	roundtrip("w/a/b.txt", 512);
	roundtrip("w/a/b.txt", 70000);
	char longname[200];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	longname[50] = '/';
	roundtrip(longname, 10); /* no ustar split fits: a PAX path record */
	char split[200];
	memset(split, 'y', sizeof(split) - 1);
	split[sizeof(split) - 1] = '\0';
	split[120] = '/';
	roundtrip(split, 10); /* prefix + name */
}

/* The egress proxy's image (docker_egress.c): its binary at the root,
 * executable, and an empty /log, then the end of the archive. */
Test(engine, proxy_image_tar_is_one_file_and_a_log_dir)
{
	static const uint8_t bin[1000] = {0x7f, 'E', 'L', 'F'};
	msb_buf tar = MSB_BUF_INIT;
	cr_assert_eq(
		msb_engine__tar_add(&tar, "msb-egress-proxy", '0', 0755, bin, sizeof(bin), NULL),
		0);
	cr_assert_eq(msb_engine__tar_add(&tar, "log", '5', 0700, NULL, 0, NULL), 0);
	cr_assert_eq(msb_engine__tar_end(&tar, NULL), 0);
	cr_assert_eq(tar.len, 512 + 1024 + 512 + 1024);
	struct hdr_seen s = {.max = sizeof(bin)};
	engine_tar_reader r;
	msb_engine__tar_reader_init(&r, on_hdr, &s);
	cr_assert_eq(msb_engine__tar_feed(&r, tar.data, tar.len, NULL), 0);
	cr_assert(r.done);
	cr_assert_str_eq(s.h.name, "msb-egress-proxy");
	cr_assert_eq(memcmp(r.body, bin, sizeof(bin)), 0);
	cr_assert_eq(memcmp(tar.data + 100, "0000755", 8), 0);
	const uint8_t *dir = tar.data + 512 + 1024;
	cr_assert_str_eq((const char *)dir, "log");
	cr_assert_eq(dir[156], '5');
	cr_assert_eq(memcmp(dir + 100, "0000700", 8), 0);
	static const uint8_t zeros[1024];
	cr_assert_eq(memcmp(tar.data + tar.len - 1024, zeros, 1024), 0);
	/* Nothing but a short name and those two kinds. */
	msb_error *e = NULL;
	cr_assert_eq(msb_engine__tar_add(&tar, "x", '2', 0777, NULL, 0, &e), MSB_E_VALUE);
	msb_error_free(e);
	msb_engine__tar_reader_clear(&r);
	msb__buf_free(&tar);
}

struct seen_events {
	int n;
	char hosts[4][64];
	msb_egress_decision decisions[4];
	uint16_t ports[4];
	const char *scope;
};

static void on_event(void *ud, const msb_key *key, const msb_egress_record *rec)
{
	struct seen_events *s = ud;
	if (s->n < 4) {
		snprintf(s->hosts[s->n], sizeof(s->hosts[0]), "%s", rec->host);
		s->decisions[s->n] = rec->decision;
		s->ports[s->n] = rec->port;
	}
	s->scope = key->scope;
	s->n++;
}

/* 21.33: the proxy's decision records, read from it, become events for the
 * key; a line that is not a record, or not whole, is not one. */
Test(engine, egress_records_become_events_21_33)
{
	struct seen_events s = {0};
	engine_backend b = {.reporter = {on_event, &s}};
	msb_buf rec = MSB_BUF_INIT;
	msb__buf_puts(&rec, "{\"bytes_down\":9,\"bytes_up\":3,\"decision\":\"ALLOW\",\"host\":"
			    "\"a.test\",\"method\":\"GET\",\"port\":80,\"reason\":\"allowlisted\","
			    "\"time_ns\":1}\n"
			    "not a record\n"
			    "{\"bytes_down\":0,\"bytes_up\":0,\"decision\":\"DENY\",\"host\":"
			    "\"evil.test\",\"method\":null,\"port\":443,\"reason\":"
			    "\"not-allowlisted\",\"time_ns\":2}\n"
			    "{\"decision\":\"ALLOW\",\"host\":\"cut");
	msb_key key = {"s", "t", "a", NULL};
	msb_engine__egress_report(&b, &key, &rec);
	cr_assert_eq(s.n, 2);
	cr_assert_str_eq(s.hosts[0], "a.test");
	cr_assert_eq(s.decisions[0], MSB_EGRESS_ALLOW);
	cr_assert_str_eq(s.hosts[1], "evil.test");
	cr_assert_eq(s.decisions[1], MSB_EGRESS_DENY);
	cr_assert_eq(s.ports[1], 443);
	cr_assert_str_eq(s.scope, "s");
	msb__buf_free(&rec);
}

Test(engine, tar_over_cap_refused_on_the_header_22_7)
{
	static uint8_t big[100000];
	msb_buf tar = MSB_BUF_INIT;
	cr_assert_eq(msb_engine__tar_one("w/f", big, sizeof(big), &tar, NULL), 0);
	struct hdr_seen s = {.max = 1000};
	engine_tar_reader r;
	msb_engine__tar_reader_init(&r, on_hdr, &s);
	msb_error *e = NULL;
	/* The header alone settles it: no body byte is needed or kept. */
	int rc = msb_engine__tar_feed(&r, tar.data, 512, &e);
	cr_assert_eq(rc, MSB_E_TRANSFER_CAP_EXCEEDED);
	cr_assert(strstr(msb_error_message(e), "max_bytes_per_file") != NULL);
	cr_assert_null(r.body);
	msb_error_free(e);
	msb_engine__tar_reader_clear(&r);
	msb__buf_free(&tar);
}

Test(engine, tar_link_and_directory_refused)
{
	msb_buf tar = MSB_BUF_INIT;
	cr_assert_eq(msb_engine__tar_one("w/f", (const uint8_t *)"x", 1, &tar, NULL), 0);
	for (int i = 0; i < 2; i++) {
		uint8_t h[512];
		memcpy(h, tar.data, 512);
		h[156] = i ? '5' : '2';
		fix_checksum(h);
		struct hdr_seen s = {.max = 100};
		engine_tar_reader r;
		msb_engine__tar_reader_init(&r, on_hdr, &s);
		msb_error *e = NULL;
		int rc = msb_engine__tar_feed(&r, h, 512, &e);
		cr_assert_eq(rc, i ? MSB_E_IS_DIRECTORY : MSB_E_OS);
		cr_assert(strstr(msb_error_message(e), i ? "is a directory" : "is a link"));
		msb_error_free(e);
		msb_engine__tar_reader_clear(&r);
	}
	msb__buf_free(&tar);
}

Test(engine, tar_garbage_and_extension_budget)
{
	uint8_t junk[512];
	memset(junk, 'z', sizeof(junk));
	engine_tar_reader r;
	struct hdr_seen s = {.max = 100};
	msb_engine__tar_reader_init(&r, on_hdr, &s);
	msb_error *e = NULL;
	cr_assert_eq(msb_engine__tar_feed(&r, junk, sizeof(junk), &e), MSB_E_PROTOCOL);
	msb_error_free(e);
	msb_engine__tar_reader_clear(&r);
	/* A PAX header announcing more than the budget. */
	msb_buf tar = MSB_BUF_INIT;
	cr_assert_eq(msb_engine__tar_one("f", (const uint8_t *)"x", 1, &tar, NULL), 0);
	uint8_t h[512];
	memcpy(h, tar.data, 512);
	h[156] = 'x';
	snprintf((char *)h + 124, 12, "%011o", 1u << 20);
	fix_checksum(h);
	msb_engine__tar_reader_init(&r, on_hdr, &s);
	e = NULL;
	cr_assert_eq(msb_engine__tar_feed(&r, h, 512, &e), MSB_E_PROTOCOL);
	cr_assert(strstr(msb_error_message(e), "extension headers exceed"));
	msb_error_free(e);
	msb_engine__tar_reader_clear(&r);
	msb__buf_free(&tar);
}

/* ---- the wslc contract through a recording runner (21.10) ---------------------- */

#define MAX_CALLS 32

/* A scripted engine: one reply per verb, or a function of the argv. */
typedef struct recorder {
	char *calls[MAX_CALLS]; /* each argv joined with " " */
	uint8_t *stdin_seen[MAX_CALLS];
	size_t stdin_len[MAX_CALLS];
	size_t n;
	/* state */
	bool exists, running, run_conflict, list_fails, exec_hangs, list_similar;
	const char *name; /* the container the script knows */
} recorder;

static char *join(char *const *argv)
{
	return msb__strv_join(argv, " ");
}

static void reply(wslc_outcome *o, int code, const char *out, const char *err)
{
	o->exit_code = code;
	if (out)
		msb__buf_puts(&o->out, out);
	if (err)
		msb__buf_puts(&o->err, err);
}

static int record_run(void *ud, char *const *argv, const wslc_io *io, wslc_outcome *o,
		      msb_error **err)
{
	recorder *rc = ud;
	memset(o, 0, sizeof(*o));
	char *line = join(argv);
	cr_assert_lt(rc->n, MAX_CALLS);
	size_t i = rc->n++;
	rc->calls[i] = line;
	if (io->has_stdin) {
		size_t total = io->in_head_len + io->in_data_len + io->in_tail_len;
		uint8_t *p = calloc(1, total + 1);
		memcpy(p, io->in_head, io->in_head_len);
		memcpy(p + io->in_head_len, io->in_data, io->in_data_len);
		rc->stdin_seen[i] = p;
		rc->stdin_len[i] = total;
	}
	const char *verb = argv[2];
	char listed[512];
	if (strcmp(verb, "list") == 0) {
		if (rc->list_fails) {
			reply(o, 1, NULL, "WSLC_E_SERVICE_UNAVAILABLE");
			return 0;
		}
		bool all = strstr(line, " -a ") != NULL;
		bool show = rc->exists && (all || rc->running);
		const char *nm = rc->list_similar ? "maf-sandbox-wslc-d510b9b10aa8-2" : rc->name;
		snprintf(listed, sizeof(listed),
			 "{\"ID\":\"cid123\",\"Names\":\"%s\",\"Labels\":"
			 "\"maf-sandbox.scope=s,maf-sandbox.thread=t,maf-sandbox.agent=a,"
			 "maf-sandbox.kind=k\",\"State\":\"%s\"}\n",
			 nm, rc->running ? "running" : "exited");
		reply(o, 0, show ? listed : "", NULL);
	} else if (strcmp(verb, "run") == 0) {
		if (rc->run_conflict) {
			rc->exists = rc->running = true;
			rc->list_similar = false;
			reply(o, 125, NULL, "Conflict.\nERROR_ALREADY_EXISTS\n");
		} else {
			rc->exists = rc->running = true;
			reply(o, 0, "cid123\n", NULL);
		}
	} else if (strcmp(verb, "start") == 0) {
		rc->running = true;
		reply(o, 0, "cid123\n", NULL);
	} else if (strcmp(verb, "remove") == 0) {
		rc->exists = rc->running = false;
		reply(o, 0, "cid123\n", NULL);
	} else if (strcmp(verb, "exec") == 0) {
		if (rc->exec_hangs) {
			o->timed_out = true;
			o->exit_code = 137;
			return 0;
		}
		reply(o, 0, "ok", NULL);
	} else if (strcmp(verb, "cp") == 0 && strcmp(argv[3], "-") == 0) {
		reply(o, 0, NULL, NULL); /* a write: stdin recorded above */
	} else if (strcmp(verb, "cp") == 0) {
		/* A stat or read: the base and its parent are directories, the
		 * rest is absent. */
		const char *path = strchr(argv[3], ':') + 1;
		if (strcmp(path, "/maf-sandbox") == 0 || strcmp(path, "/maf-sandbox/work") == 0 ||
		    strcmp(path, "/maf-sandbox/work/sub") == 0) {
			uint8_t h[512];
			dir_header(h, path + 1);
			int q = io->sink(io->sink_ud, h, sizeof(h), err);
			cr_assert_geq(q, 0);
			o->stopped = q == WSLC_SINK_DONE;
			o->exit_code = o->stopped ? 137 : 0;
		} else {
			reply(o, 1, NULL, "Error: ERROR_PATH_NOT_FOUND\n");
		}
	} else {
		reply(o, 2, NULL, "unknown");
	}
	return 0;
}

static void recorder_free(recorder *rc)
{
	for (size_t i = 0; i < rc->n; i++) {
		free(rc->calls[i]);
		free(rc->stdin_seen[i]);
	}
}

static msb_backend *wslc_backend(recorder *rc)
{
	msb_wslc_options o = MSB_WSLC_OPTIONS_INIT;
	o.wslc_path = "wslc";
	o.image = "img";
	msb_backend *b = NULL;
	cr_assert_eq(msb_wslc__backend_new(&o, record_run, rc, &b, NULL), 0);
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
#define NAME "maf-sandbox-wslc-d510b9b10aa8"
#define LABELS                                                                                     \
	"-l maf-sandbox.scope=s -l maf-sandbox.thread=t -l maf-sandbox.agent=a -l "                \
	"maf-sandbox.kind=k"

static bool has_call(recorder *rc, const char *prefix)
{
	for (size_t i = 0; i < rc->n; i++)
		if (strncmp(rc->calls[i], prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

Test(engine, wslc_create_argv_21_10_21_20)
{
	recorder rc = {.name = NAME};
	msb_backend *b = wslc_backend(&rc);
	msb_spec *spec = spec_k();
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &KEY, spec, &sb, NULL), 0);
	cr_assert_eq(rc.n, 3);
	cr_assert_str_eq(rc.calls[0], "wslc container list -a --format json --filter name=" NAME);
	cr_assert_str_eq(rc.calls[1], "wslc container run -d --name " NAME " --network none " LABELS
				      " img sleep infinity");
	cr_assert_str_eq(rc.calls[2],
			 "wslc container exec --user 0 cid123 mkdir -p -- /maf-sandbox/work");
	cr_assert_str_eq(msb_sandbox_instance_id(sb), "cid123");

	/* exec: argv natively, -w the working directory (21.26), judged
	 * first by the engine's stat (a cp to its first header; issue 16) */
	const char *argv[] = {"printf", "a b", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.working_directory = "sub";
	msb_exec_result res = {0};
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, NULL), 0);
	cr_assert_str_eq(rc.calls[3], "wslc container cp cid123:/maf-sandbox/work/sub -");
	cr_assert_str_eq(rc.calls[4], "wslc container exec -w /maf-sandbox/work/sub cid123 "
				      "printf a b");
	msb_exec_result_clear(&res);
	/* the default needs no stat: the storage base is made at create */
	req.argv = NULL;
	req.working_directory = NULL;
	req.shell = "echo hi";
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, NULL), 0);
	cr_assert_str_eq(rc.calls[5], "wslc container exec -w /maf-sandbox/work cid123 sh -c "
				      "echo hi");
	msb_exec_result_clear(&res);
	/* any absolute directory; a missing one runs nothing: 126 and why */
	req.working_directory = "/no/such";
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, NULL), 0);
	cr_assert_str_eq(rc.calls[6], "wslc container cp cid123:/no/such -");
	cr_assert_eq(rc.n, 7);
	cr_assert_eq(res.exit_code, 126);
	cr_assert_str_eq((const char *)res.stderr_bytes,
			 "msb: working directory `/no/such`: No such file or directory\n");
	cr_assert_eq(res.stdout_len, 0);
	msb_exec_result_clear(&res);
	/* the storage base itself, named: no stat either */
	req.working_directory = "/maf-sandbox/work";
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, NULL), 0);
	cr_assert_eq(rc.n, 8);
	cr_assert_str_eq(rc.calls[7], "wslc container exec -w /maf-sandbox/work cid123 sh -c "
				      "echo hi");
	msb_exec_result_clear(&res);
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	msb_backend_unref(b);
	recorder_free(&rc);
}

Test(engine, wslc_write_is_one_tar_entry_21_27)
{
	recorder rc = {.name = NAME};
	msb_backend *b = wslc_backend(&rc);
	msb_spec *spec = spec_k();
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &KEY, spec, &sb, NULL), 0);
	size_t before = rc.n;
	cr_assert_eq(msb_sandbox_write_file(sb, "a/b.txt", (const uint8_t *)"hi", 2, NULL, NULL),
		     0);
	/* The walk from the root, each stat a cp read to its first header
	 * (21.28), then the leaf, then one tar on stdin extracted at "/". */
	cr_assert_str_eq(rc.calls[before], "wslc container cp cid123:/maf-sandbox -");
	cr_assert_str_eq(rc.calls[before + 1], "wslc container cp cid123:/maf-sandbox/work -");
	cr_assert_str_eq(rc.calls[before + 2], "wslc container cp cid123:/maf-sandbox/work/a -");
	cr_assert_str_eq(rc.calls[before + 3],
			 "wslc container cp cid123:/maf-sandbox/work/a/b.txt -");
	size_t w = before + 4;
	cr_assert_str_eq(rc.calls[w], "wslc container cp - cid123:/");
	cr_assert_eq(rc.n, w + 1);
	const uint8_t *t = rc.stdin_seen[w];
	cr_assert_str_eq((const char *)t, "maf-sandbox/work/a/b.txt"); /* the entry name */
	cr_assert_eq(memcmp(t + 100, "0000644", 7), 0);		       /* mode 0644 */
	cr_assert_eq(t[156], '0');				       /* a regular file */
	cr_assert_eq(memcmp(t + 512, "hi", 2), 0);
	cr_assert_eq(rc.stdin_len[w], 512 * 4);
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	msb_backend_unref(b);
	recorder_free(&rc);
}

Test(engine, wslc_stopped_is_started_not_run_21_18)
{
	recorder rc = {.name = NAME, .exists = true, .running = false};
	msb_backend *b = wslc_backend(&rc);
	msb_spec *spec = spec_k();
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &KEY, spec, &sb, NULL), 0);
	cr_assert(has_call(&rc, "wslc container start cid123"));
	cr_assert(!has_call(&rc, "wslc container run"));
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	msb_backend_unref(b);
	recorder_free(&rc);
}

Test(engine, wslc_already_exists_is_adopted_21_18)
{
	recorder rc = {.name = NAME, .run_conflict = true};
	msb_backend *b = wslc_backend(&rc);
	msb_spec *spec = spec_k();
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &KEY, spec, &sb, NULL), 0);
	cr_assert(has_call(&rc, "wslc container run"));
	/* after the conflict: listed again, found running, reused */
	cr_assert_str_eq(rc.calls[rc.n - 1],
			 "wslc container list --format json --filter name=" NAME);
	cr_assert_str_eq(msb_sandbox_instance_id(sb), "cid123");
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	msb_backend_unref(b);
	recorder_free(&rc);
}

Test(engine, wslc_exact_name_listing_21_19)
{
	/* The filter is a substring match: "N-2" listed for "N" is not "N". */
	recorder rc = {.name = NAME, .exists = true, .running = true, .list_similar = true};
	msb_backend *b = wslc_backend(&rc);
	msb_spec *spec = spec_k();
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &KEY, spec, &sb, NULL), 0);
	cr_assert(has_call(&rc, "wslc container run -d --name " NAME " "));
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	msb_backend_unref(b);
	recorder_free(&rc);
}

Test(engine, wslc_dispose_by_labels_never_stop_21_30_21_32)
{
	recorder rc = {.name = NAME, .exists = true, .running = true};
	msb_backend *b = wslc_backend(&rc);
	msb_disposal_failure *f = NULL;
	cr_assert_eq(msb_backend_dispose(b, &KEY, NULL, NULL, &f, NULL), 0);
	cr_assert_null(f);
	cr_assert_str_eq(rc.calls[0],
			 "wslc container list -a --format json --filter "
			 "label=maf-sandbox.scope=s --filter label=maf-sandbox.thread=t --filter "
			 "label=maf-sandbox.agent=a");
	cr_assert_str_eq(rc.calls[1], "wslc container remove -f " NAME);
	cr_assert(!has_call(&rc, "wslc container stop"));
	msb_backend_unref(b);
	recorder_free(&rc);
}

Test(engine, wslc_dispose_scope_counts_21_31)
{
	recorder rc = {.name = NAME, .exists = true, .running = true};
	msb_backend *b = wslc_backend(&rc);
	msb_scope_purge p = {0};
	cr_assert_eq(msb_backend_dispose_scope(b, "s", "t", &p, NULL), 0);
	cr_assert_eq(p.disposed, 1);
	cr_assert_str_eq(rc.calls[0], "wslc container list -a --format json --filter "
				      "label=maf-sandbox.scope=s --filter "
				      "label=maf-sandbox.thread=t");
	/* Another thread selects nothing, though the engine listed the
	 * container (the recorder ignores filters): labels read back decide. */
	recorder rc2 = {.name = NAME, .exists = true, .running = true};
	msb_backend *b2 = wslc_backend(&rc2);
	cr_assert_eq(msb_backend_dispose_scope(b2, "s", "other", &p, NULL), 0);
	cr_assert_eq(p.disposed, 0);
	cr_assert(!has_call(&rc2, "wslc container remove"));
	msb_backend_unref(b);
	msb_backend_unref(b2);
	recorder_free(&rc);
	recorder_free(&rc2);
}

Test(engine, wslc_dispose_falls_back_to_remembered_names_21_30)
{
	recorder rc = {.name = NAME};
	msb_backend *b = wslc_backend(&rc);
	msb_spec *spec = spec_k();
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &KEY, spec, &sb, NULL), 0);
	rc.list_fails = true;
	msb_disposal_failure *f = NULL;
	cr_assert_eq(msb_backend_dispose(b, &KEY, NULL, NULL, &f, NULL), 0);
	cr_assert_null(f, "the remembered name was removed: %s", f ? f->detail : "");
	cr_assert_str_eq(rc.calls[rc.n - 1], "wslc container remove -f " NAME);
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	msb_backend_unref(b);
	recorder_free(&rc);

	/* Nothing remembered and no listing: a failure, reported not raised. */
	recorder rc2 = {.name = NAME, .list_fails = true};
	msb_backend *b2 = wslc_backend(&rc2);
	cr_assert_eq(msb_backend_dispose(b2, &KEY, NULL, NULL, &f, NULL), 0);
	cr_assert_not_null(f);
	cr_assert_eq(f->code, MSB_DISPOSAL_UNREACHABLE);
	msb_disposal_failure_free(f);
	msb_backend_unref(b2);
	recorder_free(&rc2);
}

Test(engine, wslc_exec_timeout_removes_the_container_21_26)
{
	recorder rc = {.name = NAME};
	msb_backend *b = wslc_backend(&rc);
	msb_spec *spec = spec_k();
	msb_sandbox *sb = NULL;
	cr_assert_eq(msb_backend_acquire(b, &KEY, spec, &sb, NULL), 0);
	rc.exec_hangs = true;
	const char *argv[] = {"sleep", "30", NULL};
	msb_exec_request req = MSB_EXEC_REQUEST_INIT;
	req.argv = argv;
	req.timeout = 1;
	msb_exec_result res = {0};
	msb_error *e = NULL;
	cr_assert_eq(msb_sandbox_exec(sb, &req, &res, &e), MSB_E_TIMEOUT);
	cr_assert_str_eq(rc.calls[rc.n - 1], "wslc container remove -f cid123");
	msb_error_free(e);
	msb_sandbox_free(sb);
	msb_spec_unref(spec);
	msb_backend_unref(b);
	recorder_free(&rc);
}

Test(engine, wslc_declarations_21_1_to_21_8)
{
	recorder rc = {.name = NAME};
	msb_backend *b = wslc_backend(&rc);
	cr_assert_str_eq(msb_backend_name(b), "wslc");
	cr_assert_str_eq(msb_backend_isolation(b), "container");
	const msb_declarations *d = msb_backend_declarations(b);
	cr_assert_eq(d->capabilities, MSB_CAP_EXEC | MSB_CAP_FILES_IN);
	cr_assert_eq(d->egress_modes, MSB_EGRESS_CLOSED);
	cr_assert_eq(d->os_families, MSB_OS_POSIX);
	cr_assert_eq(d->isolation_scopes, MSB_SCOPE_CONVERSATION);
	cr_assert_eq(memcmp(&d->limits, &MSB_DEFAULT_SANDBOX_LIMITS, sizeof(d->limits)), 0);
	cr_assert_eq(d->n_egress_method_tokens, 0);
	cr_assert(!d->egress_method_tokens_all); /* 22.13 */
	cr_assert_eq(rc.n, 0);			 /* construction runs nothing */
	msb_backend_unref(b);
	recorder_free(&rc);

	/* A proxy image asks for the allowlist topology: refused, not ignored. */
	msb_wslc_options o = MSB_WSLC_OPTIONS_INIT;
	o.egress_proxy_image = "p";
	msb_error *e = NULL;
	cr_assert_eq(msb_wslc_backend_new(&o, &b, &e), MSB_E_NOT_IMPLEMENTED);
	msb_error_free(e);
}

Test(engine, wslc_from_json_is_strict)
{
	msb_backend *b = NULL;
	msb_error *e = NULL;
	const char *bad = "{\"type\":\"wslc\",\"wslc_pth\":\"x\"}";
	cr_assert_eq(msb_wslc_backend_from_json(bad, strlen(bad), &b, &e), MSB_E_VALUE);
	cr_assert(strstr(msb_error_message(e), "wslc_pth"));
	msb_error_free(e);
	const char *good = "{\"type\":\"wslc\",\"wslc_path\":\"/x/wslc\",\"command_timeout\":5}";
	cr_assert_eq(msb_wslc_backend_from_json(good, strlen(good), &b, NULL), 0);
	msb_backend_unref(b);
}

Test(engine, wslc_error_code_from_stderr)
{
	const char *t = "Error: something\nERROR_ALREADY_EXISTS (0x800700b7)\n";
	char *c = msb_wslc__error_code(t, strlen(t));
	cr_assert_str_eq(c, "ERROR_ALREADY_EXISTS");
	free(c);
	t = "failed: WSLC_E_CONTAINER_NOT_FOUND";
	c = msb_wslc__error_code(t, strlen(t));
	cr_assert_str_eq(c, "WSLC_E_CONTAINER_NOT_FOUND");
	free(c);
	t = "MY_ERROR_X and nothing";
	cr_assert_null(msb_wslc__error_code(t, strlen(t)));
}
