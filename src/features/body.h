/* body.h: the request body kept for Ruby and replayed to later modules.
 *
 * What a script reads of the body is kept in memory (the client request's
 * pool) and an input filter serves it again to whoever reads the body
 * afterwards (mod_proxy, a CGI, the redirected request of an internal
 * redirect), then the rest from the client: reading in Ruby consumes
 * nothing. */
#ifndef MM_BODY_H
#define MM_BODY_H

#include "httpd.h"
#include "util_filter.h"

typedef struct mm_body mm_body_t;

/* The kept body of r's client request (shared by its subrequests and
 * internal redirects), created on first use. */
mm_body_t *mm_body_of(request_rec *r);

/* Reads from the client until more than `upto` bytes are kept or the body
 * ended, never keeping more than `limit` bytes plus one read (limit 0: no
 * limit of our own). Returns OK, HTTP_REQUEST_ENTITY_TOO_LARGE (the limit,
 * or LimitRequestBody for a Content-Length over it: nothing was read), an
 * HTTP error status for a failed read, or AP_FILTER_ERROR when httpd has
 * already answered the client (e.g. a chunked body over LimitRequestBody).
 * *why tells what happened, for an error. */
int mm_body_fill(request_rec *r, mm_body_t *b, apr_off_t upto, apr_off_t limit, const char **why);

/* Bytes kept so far, and whether they are the whole body. */
apr_off_t mm_body_kept(const mm_body_t *b);
int mm_body_complete(const mm_body_t *b);

/* Copies up to len kept bytes from pos to dst; returns the count. With
 * stop_at_lf, stops after the first LF. */
apr_size_t mm_body_copy(const mm_body_t *b, apr_off_t pos, char *dst, apr_size_t len, int stop_at_lf);

/* The position of the first c at or after from in the kept bytes, or -1. */
apr_off_t mm_body_find(const mm_body_t *b, apr_off_t from, char c);

/* Registers the replay filter and the hook that puts it on internally
 * redirected requests (from register_hooks). */
void mm_body_register_hooks(apr_pool_t *p);

#endif
