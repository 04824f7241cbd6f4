/* subreq.h: a subrequest whose response is kept instead of sent
 * (Request#subrequest): httpd's own machinery runs it, so mod_proxy's
 * balancers, connection pools and TLS serve scripts too. No Ruby. */
#ifndef MM_SUBREQ_H
#define MM_SUBREQ_H

#include "httpd.h"

typedef struct {
    int status;
    apr_table_t *headers;     /* the subrequest's headers_out and err_headers_out */
    apr_bucket_brigade *body; /* its body: the caller copies it out */
    apr_size_t len;
    int too_large; /* the body passed max: the rest was dropped */
} mm_subreq_result_t;

/* Runs method uri as a subrequest of r, with headers (may be NULL) set on
 * its headers_in and, when body is not NULL, body_len bytes of body as its
 * request body; keeps up to max bytes of its response body. What it
 * returns lives in p, a pool the caller destroys once it has copied it
 * (a subpool of r->pool: a request that makes many subrequests does not
 * hold their bodies until it ends). */
void mm_subreq_run(request_rec *r, apr_pool_t *p, const char *method, const char *uri,
                   const apr_table_t *headers, const char *body, apr_size_t body_len, apr_size_t max,
                   mm_subreq_result_t *out);

/* True when r is a subrequest given a body of its own by mm_subreq_run:
 * a script there reads that body, not the client's (body.c). */
int mm_subreq_has_body(const request_rec *r);

/* Registers the output filter that keeps the body. */
void mm_subreq_register_hooks(apr_pool_t *p);

#endif
