/* subreq.h: a subrequest whose response is kept instead of sent
 * (Request#subrequest): httpd's own machinery runs it, so mod_proxy's
 * balancers, connection pools and TLS serve scripts too. No Ruby. */
#ifndef MM_SUBREQ_H
#define MM_SUBREQ_H

#include "httpd.h"

typedef struct {
    int status;
    apr_table_t *headers; /* the subrequest's headers_out and err_headers_out */
    const char *body;     /* allocated from r->pool */
    apr_size_t len;
    int too_large; /* the body passed max: the rest was dropped */
} mm_subreq_result_t;

/* Runs method uri as a subrequest of r, with headers (may be NULL) set on
 * its headers_in, keeping up to max bytes of its body. Everything is
 * allocated from r->pool. */
void mm_subreq_run(request_rec *r, const char *method, const char *uri, const apr_table_t *headers,
                   apr_size_t max, mm_subreq_result_t *out);

/* Registers the output filter that keeps the body. */
void mm_subreq_register_hooks(apr_pool_t *p);

#endif
