/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kept agent stream (docs/engine.md, "The kept agent stream"): on a
 * handle's first exec, msb-agent (the binary the confined file plane places
 * at /.msb/) is started once in the container as `msb-agent --engine` on a
 * stream the transport keeps open (docker_stream.c), and the protocol
 * client (src/client) speaks to it; every exec of the handle is then
 * frames on that stream - the agent forks the command, streams its output
 * within our credit, and kills its process group on a timeout itself. An
 * exec costs a round trip instead of the engine's create, start and
 * inspect.
 *
 * One exec at a time per stream: an exec that finds the stream busy (a
 * concurrent call on the same handle) is one engine exec, as is every exec
 * where no stream can be made (no agent to place, one that does not
 * answer). A stream lost while idle (the agent killed, the engine
 * restarted) is seen before the next exec and renewed; one lost under an
 * exec fails that exec with a typed error - the engine's own when it is
 * unreachable - and the next exec makes a fresh one.
 */
#include <msb/paths.h>

#include "client/client.h"
#include "engine.h"

/* The agent's HELLO, from the start of the stream. */
#define KEPT_HELLO_TIMEOUT 10.0

void msb_engine__kept_init(engine_kept *k)
{
	*k = (engine_kept){0};
	pthread_mutex_init(&k->lock, NULL);
}

static void drop(engine_backend *b, engine_kept *k)
{
	msb_client__free(k->client);
	k->client = NULL;
	if (k->stream)
		b->ops->stream_close(k->stream);
	k->stream = NULL;
}

void msb_engine__kept_clear(engine_kept *k, engine_backend *b)
{
	if (k->client || k->stream)
		drop(b, k);
	pthread_mutex_destroy(&k->lock);
}

/* A fresh stream: 0, ENGINE_KEPT_UNAVAILABLE (no agent here: engine
 * execs from now on, said once), or the transport's error. */
static int start(engine_backend *b, engine_kept *k, const char *ref, const char *base,
		 msb_error **err)
{
	if (!msb_engine__agent_place(b, ref)) {
		k->state = -1;
		return ENGINE_KEPT_UNAVAILABLE;
	}
	const char *argv[] = {b->agent_guest, "--engine", "--work", base, NULL};
	int fd = -1;
	int r = b->ops->stream_open(b->t, ref, argv, &k->stream, &fd, err);
	if (r < 0)
		return r;
	msb_error *e = NULL;
	r = msb_client__connect_fd(fd, KEPT_HELLO_TIMEOUT, &k->client, &e);
	if (r < 0) {
		msb__log(&b->log, MSB_LOG_WARNING, b->transport_tag,
			 "the kept agent stream to `%.12s` did not start (%s): one engine exec per "
			 "call",
			 ref, msb_error_message(e));
		msb_error_free(e);
		k->client = NULL;
		drop(b, k);
		k->state = -1;
		return ENGINE_KEPT_UNAVAILABLE;
	}
	k->state = 1;
	k->streams++;
	return 0;
}

/* The exec's failure when its stream ended under it. */
static int lost(engine_backend *b, const char *name, msb_error **err)
{
	engine_state st = ENGINE_ABSENT;
	_cleanup_free_ char *id = NULL;
	msb_error *e = NULL;
	int r = b->ops->inspect(b->t, name, &st, &id, &e);
	if (r < 0) {
		/* the engine's own answer: unreachable, typically */
		if (err) {
			msb_error_free(*err);
			*err = TAKE_PTR(e);
		}
		msb_error_free(e);
		return r;
	}
	msb_error_free(e);
	if (err) {
		msb_error_free(*err);
		*err = NULL;
	}
	if (st != ENGINE_RUNNING)
		return msb_error_set(
			err, MSB_E_RUNTIME,
			"exec: container `%s` is %s: the kept agent stream ended with it", name,
			st == ENGINE_ABSENT ? "gone" : "stopped");
	return msb_error_set(err, MSB_E_RUNTIME,
			     "exec: the kept agent stream to `%s` ended under the exec (its agent "
			     "was killed, or the engine dropped the stream); the next exec makes a "
			     "fresh one",
			     name);
}

int msb_engine__kept_exec(engine_backend *b, engine_kept *k, const char *ref, const char *name,
			  const char *base, const msb_exec_request *req, bool bounded,
			  msb_exec_result *out, msb_error **err)
{
	if (b->kept_off || !b->ops->stream_open || !b->agent_guest ||
	    __atomic_load_n(&k->state, __ATOMIC_ACQUIRE) < 0)
		return ENGINE_KEPT_UNAVAILABLE;
	if (pthread_mutex_trylock(&k->lock) != 0)
		return ENGINE_KEPT_UNAVAILABLE; /* busy: this one is an engine exec */
	int r = 0;
	if (k->client && !msb_client__idle_ok(k->client))
		drop(b, k); /* ended while idle: renewed, nothing was asked of it */
	if (!k->client && k->state >= 0)
		r = start(b, k, ref, base, err);
	if (r != 0 || !k->client) {
		pthread_mutex_unlock(&k->lock);
		return r != 0 ? r : ENGINE_KEPT_UNAVAILABLE;
	}
	msb_exec_request q = *req;
	q.max_output_bytes = bounded ? req->max_output_bytes : 0;
	r = msb_client__exec(k->client, &q, out, err);
	if (r < 0 && r != MSB_E_TIMEOUT && r != MSB_E_CANCELLED &&
	    !msb_client__idle_ok(k->client)) {
		drop(b, k);
		if (r == MSB_E_PROTOCOL)
			r = lost(b, name, err);
	} else if (r == MSB_E_TIMEOUT && err && *err) {
		int sig = MSB_SIGNAL_UNKNOWN;
		msb_error_timeout(*err, &sig, NULL, NULL);
		msb_error_wrap(err, "exec timed out after %g s: %s", req->timeout,
			       sig == MSB_SIGNAL_SENT ? "its process group was killed"
						      : "its process group was signalled");
	}
	pthread_mutex_unlock(&k->lock);
	return r;
}
