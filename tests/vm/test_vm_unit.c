/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `vm` backend's parts that need no VM: the channel's multiplexer (codec
 * and both ends over a socketpair), the EXEC_FILE flag's rules, the file
 * plane served by msb-agent as an ordinary process, the cpio writer, the
 * ELF reader behind the `host` image, and the initramfs's content digest.
 */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <msb/msb.h>

#include "../agent/harness.h"
#include "backends/ns/ns_snapshot.h"
#include "backends/vm/vm_files.h"
#include "backends/vm/vm_int.h"
#include "client/client.h"
#include "proto/mux_link.h"

/* ---- the mux codec -------------------------------------------------------------- */

static int feed_one(const uint8_t *rec, size_t len, msb_mux_record *m)
{
	static msb_mux_reader rd;
	msb_mux_reader_init(&rd);
	int rc = 0;
	/* One byte at a time: any split decodes the same. */
	for (size_t i = 0; i < len; i++) {
		cr_assert_eq(msb_mux_feed(&rd, rec + i, 1), 1);
		rc = msb_mux_next(&rd, m);
		if (rc < 0)
			return rc; /* refused as soon as the header is in */
		if (rc == 1)
			return i + 1 == len ? rc : -100;
	}
	return rc;
}

static size_t rec(uint8_t *out, uint16_t type, uint16_t zero, uint32_t conn, uint32_t len)
{
	msb_mux_put_header(out, type, conn, len);
	out[6] = (uint8_t)zero;
	memset(out + MSB_MUX_HEADER, 'x', len);
	return MSB_MUX_HEADER + len;
}

Test(vm_unit, mux_codec)
{
	static uint8_t b[MSB_MUX_RECORD_MAX + 64];
	msb_mux_record m;
	cr_assert_eq(feed_one(b, rec(b, MSB_MUX_DATA, 0, 7, 5), &m), 1);
	cr_assert_eq(m.type, MSB_MUX_DATA);
	cr_assert_eq(m.conn, 7);
	cr_assert_eq(m.len, 5);
	cr_assert_eq(feed_one(b, msb_mux_put_credit(b, 3, 1000), &m), 1);
	cr_assert_eq(m.credit, 1000);
	cr_assert_eq(feed_one(b, rec(b, MSB_MUX_READY, 0, 9, 0), &m), 1);
	cr_assert_eq(m.conn, 9);
	/* Refused: unknown type, reserved bits, empty or oversize DATA, credit 0
	 * or past the window, a stream record on stream 0, READY on a stream. */
	cr_assert_eq(feed_one(b, rec(b, 9, 0, 1, 0), &m), MSB_PROTO_E_UNKNOWN);
	cr_assert_eq(feed_one(b, rec(b, MSB_MUX_OPEN, 1, 1, 0), &m), MSB_PROTO_E_MALFORMED);
	cr_assert_eq(feed_one(b, rec(b, MSB_MUX_DATA, 0, 1, 0), &m), MSB_PROTO_E_MALFORMED);
	msb_mux_put_header(b, MSB_MUX_DATA, 1, MSB_MUX_MAX_DATA + 1);
	cr_assert_eq(feed_one(b, MSB_MUX_HEADER, &m), MSB_PROTO_E_LIMIT);
	cr_assert_eq(feed_one(b, msb_mux_put_credit(b, 3, 0), &m), MSB_PROTO_E_LIMIT);
	cr_assert_eq(feed_one(b, msb_mux_put_credit(b, 3, MSB_MUX_WINDOW + 1), &m),
		     MSB_PROTO_E_LIMIT);
	cr_assert_eq(feed_one(b, rec(b, MSB_MUX_OPEN, 0, 0, 0), &m), MSB_PROTO_E_MALFORMED);
	cr_assert_eq(feed_one(b, rec(b, MSB_MUX_READY, 0, 0, 0), &m), MSB_PROTO_E_MALFORMED);
	cr_assert_eq(feed_one(b, rec(b, MSB_MUX_READY, 0, 2, 1), &m), MSB_PROTO_E_MALFORMED);
	/* SESSION: its exact length, a session number, the magic. */
	size_t sl = rec(b, MSB_MUX_SESSION, 0, 4, MSB_MUX_SESSION_LEN);
	memcpy(b + MSB_MUX_HEADER, MSB_MUX_SESSION_MAGIC, MSB_MUX_SESSION_MAGIC_LEN);
	cr_assert_eq(feed_one(b, sl, &m), 1);
	cr_assert_eq(m.type, MSB_MUX_SESSION);
	b[MSB_MUX_HEADER] = 'X';
	cr_assert_eq(feed_one(b, sl, &m), MSB_PROTO_E_MALFORMED);
	cr_assert_eq(feed_one(b, rec(b, MSB_MUX_SESSION, 0, 4, 8), &m), MSB_PROTO_E_MALFORMED);
	cr_assert_eq(feed_one(b, rec(b, MSB_MUX_SESSION, 0, 0, MSB_MUX_SESSION_LEN), &m),
		     MSB_PROTO_E_MALFORMED);
	cr_assert_eq(feed_one(b, rec(b, MSB_MUX_CLOSE, 0, 2, 1), &m), MSB_PROTO_E_MALFORMED);
}

/* ---- both ends of the link ------------------------------------------------------ */

static int guest_local[8]; /* the test's ends of the streams the guest opened */
static int n_guest_local;

static int guest_open(void *ud)
{
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	guest_local[n_guest_local++] = sp[1];
	return sp[0];
}

static void pump(msb_mux_link *a, msb_mux_link *b, int turns)
{
	struct pollfd fa[1 + MSB_MUX_MAX_STREAMS], fb[1 + MSB_MUX_MAX_STREAMS];
	for (int i = 0; i < turns; i++) {
		size_t na = msb_mux_link_pollfds(a, fa, 1 + MSB_MUX_MAX_STREAMS);
		size_t nb = msb_mux_link_pollfds(b, fb, 1 + MSB_MUX_MAX_STREAMS);
		poll(fa, na, 5);
		poll(fb, nb, 5);
		cr_assert_eq(msb_mux_link_handle(a, fa, na), 0, "%s", msb_mux_link_why(a));
		cr_assert_eq(msb_mux_link_handle(b, fb, nb), 0, "%s", msb_mux_link_why(b));
	}
}

static size_t drain(int fd, uint8_t *buf, size_t cap)
{
	size_t got = 0;
	for (;;) {
		ssize_t n = recv(fd, buf + got, cap - got, MSG_DONTWAIT);
		if (n <= 0)
			return got;
		got += (size_t)n;
	}
}

Test(vm_unit, mux_link_streams)
{
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	msb_mux_link *host = msb_mux_link_new(sp[0], true, NULL, NULL);
	msb_mux_link *guest = msb_mux_link_new(sp[1], false, guest_open, NULL);
	cr_assert(host && guest);
	static uint8_t id[MSB_MUX_SESSION_LEN] = MSB_MUX_SESSION_MAGIC;
	cr_assert_eq(msb_mux_link_send_session(host, 3, id), 0);
	pump(host, guest, 3);
	cr_assert(msb_mux_link_ready(host));

	/* Two host connections, two guest streams, bytes kept apart. */
	int c1[2], c2[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c1), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c2), 0);
	cr_assert_eq(msb_mux_link_add(host, c1[0]), 0);
	cr_assert_eq(msb_mux_link_add(host, c2[0]), 0);
	pump(host, guest, 3);
	cr_assert_eq(n_guest_local, 2);
	cr_assert_eq(msb_mux_link_streams(guest), 2);
	/* More than one window each way: credit must flow back. */
	size_t big = 3 * MSB_MUX_WINDOW;
	uint8_t *data = malloc(big), *got = malloc(big);
	for (size_t i = 0; i < big; i++)
		data[i] = (uint8_t)(i * 13);
	size_t sent = 0, recvd = 0;
	fcntl(c1[1], F_SETFL, O_NONBLOCK);
	for (int i = 0; i < 2000 && recvd < big; i++) {
		if (sent < big) {
			ssize_t n = send(c1[1], data + sent, big - sent, MSG_DONTWAIT);
			if (n > 0)
				sent += (size_t)n;
		}
		pump(host, guest, 1);
		recvd += drain(guest_local[0], got + recvd, big - recvd);
	}
	cr_assert_eq(recvd, big);
	cr_assert_eq(memcmp(data, got, big), 0);
	cr_assert_eq(drain(guest_local[1], got, big), 0, "bytes crossed streams");
	/* The other way, on the second stream. */
	cr_assert_eq(send(guest_local[1], "pong", 4, 0), 4);
	pump(host, guest, 3);
	char pong[8] = "";
	cr_assert_eq(recv(c2[1], pong, sizeof(pong), MSG_DONTWAIT), 4);
	cr_assert_eq(memcmp(pong, "pong", 4), 0);
	/* A host connection that closes closes its guest stream. */
	close(c1[1]);
	pump(host, guest, 5);
	cr_assert_eq(recv(guest_local[0], got, 1, MSG_DONTWAIT), 0, "no end of file");
	cr_assert_eq(msb_mux_link_streams(host), 1);
	free(data);
	free(got);
	msb_mux_link_free(host);
	msb_mux_link_free(guest);
}

/* ---- host sessions (issue 18) ------------------------------------------------------ */

static int n_sessions;
static bool refuse_session;
static uint8_t last_session[MSB_MUX_SESSION_LEN];

static int on_session(void *ud, const uint8_t *payload)
{
	n_sessions++;
	memcpy(last_session, payload, MSB_MUX_SESSION_LEN);
	return refuse_session ? -EIO : 0;
}

static int turn(msb_mux_link *l)
{
	struct pollfd f[1 + MSB_MUX_MAX_STREAMS];
	size_t n = msb_mux_link_pollfds(l, f, 1 + MSB_MUX_MAX_STREAMS);
	poll(f, n, 5);
	return msb_mux_link_handle(l, f, n);
}

static void put_session(int fd, uint32_t session, char tag)
{
	uint8_t r[MSB_MUX_HEADER + MSB_MUX_SESSION_LEN];
	msb_mux_put_header(r, MSB_MUX_SESSION, session, MSB_MUX_SESSION_LEN);
	memset(r + MSB_MUX_HEADER, tag, MSB_MUX_SESSION_LEN);
	memcpy(r + MSB_MUX_HEADER, MSB_MUX_SESSION_MAGIC, MSB_MUX_SESSION_MAGIC_LEN);
	cr_assert_eq(write(fd, r, sizeof(r)), (ssize_t)sizeof(r));
}

static void put_simple(int fd, uint16_t type, uint32_t conn)
{
	uint8_t r[MSB_MUX_HEADER];
	msb_mux_put_header(r, type, conn, 0);
	cr_assert_eq(write(fd, r, sizeof(r)), (ssize_t)sizeof(r));
}

/* READY for `session` is what the guest sent last. */
static void expect_ready(int fd, uint32_t session)
{
	uint8_t r[64], want[MSB_MUX_HEADER];
	ssize_t n = recv(fd, r, sizeof(r), MSG_DONTWAIT);
	msb_mux_put_header(want, MSB_MUX_READY, session, 0);
	cr_assert_geq(n, (ssize_t)MSB_MUX_HEADER);
	cr_assert_eq(memcmp(r + n - MSB_MUX_HEADER, want, MSB_MUX_HEADER), 0, "no READY %u",
		     (unsigned)session);
}

/* The guest end: whatever precedes the first SESSION is skipped (bytes of an
 * old host), each SESSION drops the session before (no hang-up needed) and is
 * answered READY with its number once its identity is applied; a refused
 * identity fails the link, so nothing is served before the guest is unique. */
Test(vm_unit, mux_guest_sessions)
{
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	msb_mux_link *guest = msb_mux_link_new(sp[1], false, guest_open, NULL);
	msb_mux_link_on_session(guest, on_session);
	n_guest_local = 0;
	/* An old session's tail: half a header, a record for a stream never
	 * opened here. Skipped, not a protocol error. */
	cr_assert_eq(write(sp[0], "\x05\x00\x00", 3), 3);
	put_simple(sp[0], MSB_MUX_CLOSE, 12);
	cr_assert_eq(turn(guest), 0, "%s", msb_mux_link_why(guest));
	cr_assert_eq(n_sessions, 0);
	put_session(sp[0], 7, 'a');
	cr_assert_eq(turn(guest), 0, "%s", msb_mux_link_why(guest));
	cr_assert_eq(n_sessions, 1);
	cr_assert_eq(last_session[MSB_MUX_SESSION_LEN - 1], 'a');
	expect_ready(sp[0], 7);
	put_simple(sp[0], MSB_MUX_OPEN, 1);
	cr_assert_eq(turn(guest), 0);
	cr_assert_eq(msb_mux_link_streams(guest), 1);
	/* The next host's SESSION, its predecessor's hang-up never seen: the
	 * old stream ends (its local end reads end of file), ids begin anew. */
	put_session(sp[0], 9, 'b');
	cr_assert_eq(turn(guest), 0, "%s", msb_mux_link_why(guest));
	cr_assert_eq(n_sessions, 2);
	expect_ready(sp[0], 9);
	cr_assert_eq(msb_mux_link_streams(guest), 0);
	char c;
	cr_assert_eq(recv(guest_local[0], &c, 1, MSG_DONTWAIT), 0);
	put_simple(sp[0], MSB_MUX_OPEN, 1);
	cr_assert_eq(turn(guest), 0, "%s", msb_mux_link_why(guest));
	cr_assert_eq(msb_mux_link_streams(guest), 1);
	/* An identity the guest could not apply: no READY, the link ends. */
	refuse_session = true;
	put_session(sp[0], 11, 'c');
	cr_assert_lt(turn(guest), 0);
	refuse_session = false;
	msb_mux_link_free(guest);
	close(sp[0]);
}

/* The host end: SESSION goes out first, and only the guest's READY for that
 * session makes the link ready; bytes ahead of it (an old session's records,
 * a READY of another session, a torn record) are skipped. */
Test(vm_unit, mux_host_session)
{
	int sp[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	msb_mux_link *host = msb_mux_link_new(sp[0], true, NULL, NULL);
	uint8_t id[MSB_MUX_SESSION_LEN] = MSB_MUX_SESSION_MAGIC;
	cr_assert_eq(msb_mux_link_send_session(host, 0, id), -EINVAL);
	cr_assert_eq(msb_mux_link_send_session(host, 42, id), 0);
	cr_assert_eq(turn(host), 0);
	uint8_t r[MSB_MUX_HEADER + MSB_MUX_SESSION_LEN], want[MSB_MUX_HEADER];
	cr_assert_eq(recv(sp[1], r, sizeof(r), MSG_DONTWAIT), (ssize_t)sizeof(r));
	msb_mux_put_header(want, MSB_MUX_SESSION, 42, MSB_MUX_SESSION_LEN);
	cr_assert_eq(memcmp(r, want, MSB_MUX_HEADER), 0);
	put_simple(sp[1], MSB_MUX_CLOSE, 3);
	put_simple(sp[1], MSB_MUX_READY, 41);
	cr_assert_eq(write(sp[1], "\x01\x02", 2), 2);
	cr_assert_eq(turn(host), 0, "%s", msb_mux_link_why(host));
	cr_assert(!msb_mux_link_ready(host));
	put_simple(sp[1], MSB_MUX_READY, 42);
	cr_assert_eq(turn(host), 0, "%s", msb_mux_link_why(host));
	cr_assert(msb_mux_link_ready(host));
	/* Synchronised from here: a broken record is an error again. */
	cr_assert_eq(write(sp[1], "\x00\x00\x00\x00\x63\x00\x00\x00\x01\x00\x00\x00", 12), 12);
	cr_assert_eq(turn(host), -EPROTO);
	msb_mux_link_free(host);
	close(sp[1]);
}

/* A guest that sends past its window breaks the link. */
Test(vm_unit, mux_link_window_enforced)
{
	int sp[2], c[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c), 0);
	/* The local reader never reads: what the guest sends stays here. */
	int small = 4096;
	setsockopt(c[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	setsockopt(c[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	msb_mux_link *host = msb_mux_link_new(sp[0], true, NULL, NULL);
	static uint8_t id[MSB_MUX_SESSION_LEN] = MSB_MUX_SESSION_MAGIC;
	cr_assert_eq(msb_mux_link_send_session(host, 5, id), 0);
	cr_assert_eq(msb_mux_link_add(host, c[0]), 0);
	static uint8_t rec_buf[MSB_MUX_RECORD_MAX];
	msb_mux_put_header(rec_buf, MSB_MUX_READY, 5, 0);
	cr_assert_eq(write(sp[1], rec_buf, MSB_MUX_HEADER), (ssize_t)MSB_MUX_HEADER);
	struct pollfd f[1 + MSB_MUX_MAX_STREAMS];
	size_t n = msb_mux_link_pollfds(host, f, 1 + MSB_MUX_MAX_STREAMS);
	poll(f, n, 10);
	msb_mux_link_handle(host, f, n); /* SESSION and OPEN go out */
	cr_assert(msb_mux_link_ready(host));
	int r = 0;
	for (uint32_t sent = 0; sent <= MSB_MUX_WINDOW && r == 0; sent += MSB_MUX_MAX_DATA) {
		msb_mux_put_header(rec_buf, MSB_MUX_DATA, 1, MSB_MUX_MAX_DATA);
		cr_assert_eq(write(sp[1], rec_buf, MSB_MUX_RECORD_MAX),
			     (ssize_t)MSB_MUX_RECORD_MAX);
		n = msb_mux_link_pollfds(host, f, 1 + MSB_MUX_MAX_STREAMS);
		poll(f, n, 10);
		r = msb_mux_link_handle(host, f, n);
	}
	cr_assert_eq(r, -EPROTO);
	cr_assert(strstr(msb_mux_link_why(host), "window") != NULL, "%s", msb_mux_link_why(host));
	msb_mux_link_free(host);
	close(sp[1]);
	close(c[1]);
}

/* ---- EXEC_FILE ---------------------------------------------------------------------- */

Test(vm_unit, exec_file_flag_rules)
{
	uint8_t buf[4096];
	const char *argv[] = {"read", "x", "10", NULL};
	msb_proto_exec_spec s = {MSB_PROTO_EXEC_FILE, 1024, 1000, 0, "", argv, NULL, {0, 0}};
	cr_assert_gt(msb_proto_enc_exec_open(buf, sizeof(buf), 1, &s), 0);
	s.flags |= MSB_PROTO_EXEC_SHELL;
	const char *line[] = {"true", NULL};
	s.argv = line;
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 1, &s), MSB_PROTO_E_MALFORMED);
	/* FILE has its own bit, apart from version 2's TTY, and never joins it. */
	cr_assert_neq(MSB_PROTO_EXEC_FILE, MSB_PROTO_EXEC_TTY);
	s.argv = argv;
	s.flags = MSB_PROTO_EXEC_FILE | MSB_PROTO_EXEC_TTY;
	s.winsize = (msb_proto_winsize){24, 80};
	cr_assert_eq(msb_proto_enc_exec_open(buf, sizeof(buf), 1, &s), MSB_PROTO_E_MALFORMED);
}

/* ---- the file plane in msb-agent ------------------------------------------------- */

static struct agent_proc ap;
static msb_client *cl;

static int run_file(void *ud, const msb_exec_request *req, msb_exec_result *out, msb_error **err)
{
	return msb_client__exec_file(cl, req, out, err);
}

static void agent_up(void)
{
	cr_assert_eq(agent_start(&ap), 0, "cannot start msb-agent (MSB_AGENT)");
	msb_error *err = NULL;
	cr_assert_eq(msb_client__connect(ap.sock, 5.0, &cl, &err), 0, "%s", msb_error_message(err));
}

static void agent_down(void)
{
	msb_client__free(cl);
	cl = NULL;
	agent_stop(&ap);
}

Test(vm_unit, agent_file_plane, .init = agent_up, .fini = agent_down)
{
	vm_files f = {.backend = "vm", .guest_base = ap.work, .run = run_file};
	msb_error *err = NULL;
	cr_assert_eq(msb_vm__write_file(&f, "a/b/c.txt", (const uint8_t *)"bytes\0x", 7, ".", &err),
		     0, "%s", msb_error_message(err));
	uint8_t *data = NULL;
	size_t len = 0;
	cr_assert_eq(msb_vm__read_file(&f, "c.txt", "a/b", 100, &data, &len, &err), 0, "%s",
		     msb_error_message(err));
	cr_assert_eq(len, 7);
	cr_assert_eq(memcmp(data, "bytes\0x", 7), 0);
	free(data);
	cr_assert_eq(msb_vm__read_file(&f, "a/b/c.txt", ".", 6, &data, &len, &err),
		     MSB_E_TRANSFER_CAP_EXCEEDED);
	msb_error_free(err);
	err = NULL;
	/* A link planted where a directory was: never followed. */
	char p[256];
	snprintf(p, sizeof(p), "%s/a/link", ap.work);
	cr_assert_eq(symlink("/etc", p), 0);
	cr_assert_eq(msb_vm__write_file(&f, "a/link/x", (const uint8_t *)"x", 1, ".", &err),
		     MSB_E_VALUE);
	msb_error_free(err);
	err = NULL;
	struct stat st;
	cr_assert_neq(stat("/etc/x", &st), 0);
	cr_assert_eq(msb_vm__write_file(&f, "a/link", (const uint8_t *)"x", 1, ".", &err),
		     MSB_E_VALUE);
	msb_error_free(err);
	err = NULL;
	msb_entry *v = NULL;
	size_t n = 0;
	cr_assert_eq(msb_vm__list_dir(&f, "a", ".", &v, &n, &err), 0, "%s", msb_error_message(err));
	cr_assert_eq(n, 2);
	cr_assert_str_eq(v[0].path, "a/b");
	cr_assert_eq(v[0].kind, MSB_ENTRY_DIRECTORY);
	cr_assert_str_eq(v[1].path, "a/link");
	cr_assert_eq(v[1].kind, MSB_ENTRY_SYMLINK);
	msb_entries_free(v, n);
	cr_assert_eq(msb_vm__reclaim(&f, "a", ".", &err), 0, "%s", msb_error_message(err));
	cr_assert_eq(stat("/etc/passwd", &st), 0);
	snprintf(p, sizeof(p), "%s/a", ap.work);
	cr_assert_neq(lstat(p, &st), 0);
	cr_assert_eq(msb_vm__reclaim(&f, ".", ".", &err), MSB_E_VALUE);
	msb_error_free(err);
}

/* An agent that is not a vm guest's init has no writable layer to walk: the
 * request `layer` is refused, never answered with an empty (pristine) list. */
Test(vm_unit, agent_outside_a_vm_refuses_the_fingerprint, .init = agent_up, .fini = agent_down)
{
	vm_files f = {.backend = "vm", .guest_base = ap.work, .run = run_file};
	msb_fingerprint fp = {NULL, NULL};
	msb_error *err = NULL;
	cr_assert_eq(msb_vm__fingerprint(&f, &fp, &err), MSB_E_RUNTIME);
	cr_assert(fp.changed_paths == NULL && fp.running_programs == NULL);
	msb_error_free(err);
}

static int parse(const char *bytes, size_t len, const msb_ns_fingerprint_budget *b,
		 msb_fingerprint *fp)
{
	msb_error *err = NULL;
	memset(fp, 0, sizeof(*fp));
	int r = msb_vm__fingerprint_parse((const uint8_t *)bytes, len, b, fp, &err);
	msb_error_free(err);
	return r;
}

/* The guest's fingerprint answer is untrusted: malformed records are a
 * protocol error, and past the `ns` budgets it is refused before more is held
 * (checklist 18.12-18.15; docs/security.md "Budgets on guest bytes"). */
Test(vm_unit, fingerprint_answer_parsed_as_untrusted)
{
	msb_fingerprint fp;
	static const char good[] = "p/tmp/b\0r7:100:sleep 30\0p/tmp/a\0p/tmp/a\0p/dev/shm/x\0";
	cr_assert_eq(parse(good, sizeof(good) - 1, NULL, &fp), 0);
	cr_assert_str_eq(fp.changed_paths[0], "/dev/shm/x");
	cr_assert_str_eq(fp.changed_paths[1], "/tmp/a");
	cr_assert_str_eq(fp.changed_paths[2], "/tmp/b");
	cr_assert_null(fp.changed_paths[3]);
	cr_assert_str_eq(fp.running_programs[0], "7:100:sleep 30");
	cr_assert_null(fp.running_programs[1]);
	msb_fingerprint_clear(&fp);
	cr_assert_eq(parse("", 0, NULL, &fp), 0);
	cr_assert_null(fp.changed_paths[0]);
	cr_assert_null(fp.running_programs[0]);
	msb_fingerprint_clear(&fp);
	static const struct {
		const char *b;
		size_t n;
	} bad[] = {{"p/tmp/a", 7}, {"ptmp\0", 5}, {"x/a\0", 4}, {"p\0", 2}, {"r\0", 2}, {"\0", 1}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(parse(bad[i].b, bad[i].n, NULL, &fp), MSB_E_PROTOCOL, "case %zu", i);
	msb_ns_fingerprint_budget b = MSB_NS_FINGERPRINT_BUDGET_INIT;
	b.max_paths = 2;
	cr_assert_eq(parse(good, sizeof(good) - 1, &b, &fp), MSB_E_RUNTIME);
	b = (msb_ns_fingerprint_budget)MSB_NS_FINGERPRINT_BUDGET_INIT;
	b.max_proc_bytes = 8;
	cr_assert_eq(parse(good, sizeof(good) - 1, &b, &fp), MSB_E_RUNTIME);
	b = (msb_ns_fingerprint_budget)MSB_NS_FINGERPRINT_BUDGET_INIT;
	b.max_path_len = 5;
	cr_assert_eq(parse(good, sizeof(good) - 1, &b, &fp), MSB_E_PROTOCOL);
}

/* ---- artefacts ---------------------------------------------------------------------- */

Test(vm_unit, cpio_newc)
{
	msb_buf b = MSB_BUF_INIT;
	cr_assert_eq(msb_vm__cpio_add(&b, "init", 0100755, "abc", 3), 0);
	cr_assert_eq(msb_vm__cpio_finish(&b), 0);
	cr_assert_eq(memcmp(b.data, "070701", 6), 0);
	/* name "init\0" after the 110-byte header, padded to 4; data padded. */
	cr_assert_eq(memcmp(b.data + 110, "init", 5), 0);
	cr_assert_eq(memcmp(b.data + 116, "abc", 3), 0);
	cr_assert_eq(b.len % 4, 0);
	cr_assert(memmem(b.data, b.len, "TRAILER!!!", 10) != NULL);
	msb_buf c = MSB_BUF_INIT;
	msb_vm__cpio_add(&c, "init", 0100755, "abc", 3);
	msb_vm__cpio_finish(&c);
	cr_assert_eq(b.len, c.len);
	cr_assert_eq(memcmp(b.data, c.data, b.len), 0, "not deterministic");
	msb__buf_free(&b);
	msb__buf_free(&c);
}

Test(vm_unit, elf_deps)
{
	int fd = open("/usr/bin/python3", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	char *interp = NULL;
	char **needed = NULL;
	cr_assert_eq(msb_vm__elf_deps(fd, &interp, &needed), 0);
	close(fd);
	cr_assert(interp && strstr(interp, "ld-linux"), "%s", interp);
	cr_assert(msb__strv_contains(needed, "libc.so.6"));
	free(interp);
	msb__strv_freep(&needed);
	fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
	cr_assert_eq(msb_vm__elf_deps(fd, &interp, &needed), -ENOEXEC);
	close(fd);
}
