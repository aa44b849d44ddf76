/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The docker backend's kept agent stream: the relay that turns the engine's
 * framed exec output back into a byte stream (docker_stream.c, issue 19).
 * Linux only (the Windows build has no docker backend).
 */
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include <msb/msb.h>

#include "backends/engine/docker.h"

/* One frame in one write (the relay may hang up right after a bad one). */
static void frame(int fd, uint8_t stream, const char *p, size_t n)
{
	uint8_t f[64] = {
		stream,	   0, 0, 0, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8),
		(uint8_t)n};
	cr_assert_leq(n, sizeof(f) - 8);
	memcpy(f + 8, p, n);
	cr_assert_eq(send(fd, f, 8 + n, MSG_NOSIGNAL), (ssize_t)(8 + n));
}

/* n bytes from fd within a few seconds, or fewer at its end. */
static size_t read_some(int fd, char *buf, size_t n)
{
	size_t have = 0;
	while (have < n) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 5000) <= 0)
			break;
		ssize_t got = read(fd, buf + have, n - have);
		if (got <= 0)
			break;
		have += (size_t)got;
	}
	return have;
}

Test(engine, kept_stream_relay_passes_stdout_drops_stderr_and_ends_on_a_bad_frame)
{
	int eng[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, eng), 0);
	/* Bytes read past the response head come first: half a header. */
	const uint8_t pending[] = {1, 0, 0, 0, 0};
	engine_stream *s = NULL;
	int fd = -1;
	msb_error *err = NULL;
	cr_assert_eq(msb_docker__stream_start(eng[0], pending, sizeof(pending), &s, &fd, &err), 0);
	/* ... whose length ends in the next write: 3 bytes of stdout. */
	const uint8_t rest[] = {0, 0, 3, 'a', 'b', 'c'};
	cr_assert_eq(write(eng[1], rest, sizeof(rest)), (ssize_t)sizeof(rest));
	frame(eng[1], 2, "agent log line\n", 15); /* stderr: dropped */
	frame(eng[1], 1, "de", 2);
	char buf[64] = {0};
	cr_assert_eq(read_some(fd, buf, 5), 5);
	cr_assert_str_eq(buf, "abcde");
	/* Ours go to the engine as they are. */
	cr_assert_eq(write(fd, "\x00hello", 6), 6);
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(read_some(eng[1], buf, 6), 6);
	cr_assert_eq(memcmp(buf, "\x00hello", 6), 0);
	/* A frame of stream 3: the stream ends, the client reads its end. */
	frame(eng[1], 3, "x", 1);
	cr_assert_eq(read_some(fd, buf, 1), 0);
	msb_docker__stream_close(s);
	close(fd);
	/* The engine's side was closed too. */
	cr_assert_eq(read_some(eng[1], buf, 1), 0);
	close(eng[1]);
}

Test(engine, kept_stream_relay_ends_when_the_client_closes)
{
	int eng[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, eng), 0);
	engine_stream *s = NULL;
	int fd = -1;
	cr_assert_eq(msb_docker__stream_start(eng[0], NULL, 0, &s, &fd, NULL), 0);
	close(fd); /* the client released: the engine sees the end of the stream */
	char c;
	cr_assert_eq(read_some(eng[1], &c, 1), 0);
	msb_docker__stream_close(s);
	close(eng[1]);
}
