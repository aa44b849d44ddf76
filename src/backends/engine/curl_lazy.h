/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libcurl, loaded when the docker backend first speaks to an Engine
 * (lazy_lib.h): the functions docker_http.c calls, through a table of
 * libcurl's own types. Include it instead of <curl/curl.h>, and call
 * msb_docker__curl_load() before any curl_* function.
 */
#ifndef MSB_ENGINE_CURL_LAZY_H
#define MSB_ENGINE_CURL_LAZY_H

/* curl_easy_setopt and _getinfo are plain functions then, not gcc's
 * type-checking macros (which would name the functions again); curl.h may
 * still define them as macros naming themselves: undefined below. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#include "util/util.h"

#define MSB_CURL_FUNCTIONS(X)                                                                      \
	X(curl_easy_cleanup)                                                                       \
	X(curl_easy_escape)                                                                        \
	X(curl_easy_getinfo)                                                                       \
	X(curl_easy_init)                                                                          \
	X(curl_easy_perform)                                                                       \
	X(curl_easy_reset)                                                                         \
	X(curl_easy_setopt)                                                                        \
	X(curl_easy_strerror)                                                                      \
	X(curl_free)                                                                               \
	X(curl_global_init)                                                                        \
	X(curl_slist_append)                                                                       \
	X(curl_slist_free_all)

#undef curl_easy_setopt
#undef curl_easy_getinfo
#define MSB_LAZY_SLOT(f) __typeof__(f) *f;
typedef struct msb_curl_api {
	MSB_CURL_FUNCTIONS(MSB_LAZY_SLOT)
} msb_curl_api;
#undef MSB_LAZY_SLOT

extern msb_curl_api msb_docker__curl;

/* Load libcurl (once per process); MSB_E_RUNTIME when it cannot be. */
int msb_docker__curl_load(msb_error **err);

#ifndef MSB_CURL_LAZY_IMPL
#define curl_easy_cleanup (msb_docker__curl.curl_easy_cleanup)
#define curl_easy_escape (msb_docker__curl.curl_easy_escape)
#define curl_easy_getinfo (msb_docker__curl.curl_easy_getinfo)
#define curl_easy_init (msb_docker__curl.curl_easy_init)
#define curl_easy_perform (msb_docker__curl.curl_easy_perform)
#define curl_easy_reset (msb_docker__curl.curl_easy_reset)
#define curl_easy_setopt (msb_docker__curl.curl_easy_setopt)
#define curl_easy_strerror (msb_docker__curl.curl_easy_strerror)
#define curl_free (msb_docker__curl.curl_free)
#define curl_global_init (msb_docker__curl.curl_global_init)
#define curl_slist_append (msb_docker__curl.curl_slist_append)
#define curl_slist_free_all (msb_docker__curl.curl_slist_free_all)
#endif

#endif
