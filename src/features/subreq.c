/* subreq.c: a subrequest whose response body is kept by a filter of ours
 * at the end of its output chain, rather than sent to the client. */

#include "httpd.h"
#include "apr_strings.h"
#include "http_config.h"
#include "http_request.h"
#include "util_filter.h"

#include <string.h>

#include "subreq.h"

#define MM_SUBREQ_FILTER      "MRUBY_SUBREQ_KEEP"
#define MM_SUBREQ_BODY_FILTER "MRUBY_SUBREQ_BODY"
#define MM_SUBREQ_BODY_NOTE   "mruby-subrequest-body"

static ap_filter_rec_t *keep_frec, *give_frec;

/* The request body a script gave its subrequest, served by an input
 * filter at the bottom of the subrequest's own chain (it never reads the
 * client's). */
typedef struct {
    const char *data; /* in the caller's pool, which outlives the subrequest */
    apr_size_t len, off;
} give_t;

typedef struct {
    apr_bucket_brigade *kept; /* the body so far, copied (r->pool) */
    apr_size_t len, max;
    int too_large;
} keep_t;

/* Copies the data buckets into ctx->kept, up to max bytes; passes nothing
 * on (there is nothing after it). */
static apr_status_t keep_out(ap_filter_t *f, apr_bucket_brigade *bb)
{
    keep_t *k = f->ctx;
    apr_bucket *b;

    if (k->too_large) {
        apr_brigade_cleanup(bb);
        return AP_FILTER_ERROR;
    }

    for (b = APR_BRIGADE_FIRST(bb); b != APR_BRIGADE_SENTINEL(bb); b = APR_BUCKET_NEXT(b)) {
        const char *data;
        apr_size_t len;
        apr_status_t rv;

        if (APR_BUCKET_IS_METADATA(b)) {
            continue;
        }
        rv = apr_bucket_read(b, &data, &len, APR_BLOCK_READ);
        if (rv != APR_SUCCESS) {
            apr_brigade_cleanup(bb);
            return rv;
        }
        if (k->len + len > k->max) {
            /* Past the limit, nothing more is read: the handler's next
             * pass fails, and it stops (a large file, an endless stream). */
            k->too_large = 1;
            apr_brigade_write(k->kept, NULL, NULL, data, k->max - k->len);
            k->len = k->max;
            apr_brigade_cleanup(bb);
            return AP_FILTER_ERROR;
        }
        if (len) {
            apr_brigade_write(k->kept, NULL, NULL, data, len);
            k->len += len;
        }
    }
    apr_brigade_cleanup(bb);
    return APR_SUCCESS;
}

static apr_status_t give_in(ap_filter_t *f, apr_bucket_brigade *bb, ap_input_mode_t mode,
                            apr_read_type_e block, apr_off_t readbytes)
{
    give_t *g = f->ctx;
    apr_size_t n = g->len - g->off;

    if (mode == AP_MODE_INIT || mode == AP_MODE_EATCRLF) {
        return APR_SUCCESS;
    }
    if (mode == AP_MODE_GETLINE) {
        const char *lf = memchr(g->data + g->off, '\n', n);

        if (lf) {
            n = (apr_size_t)(lf - (g->data + g->off)) + 1;
        }
    } else if (mode != AP_MODE_EXHAUSTIVE && readbytes >= 0 && (apr_off_t)n > readbytes) {
        n = (apr_size_t)readbytes;
    }
    if (n > 0) {
        APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_immortal_create(g->data + g->off, n, bb->bucket_alloc));
    }
    if (mode != AP_MODE_SPECULATIVE) {
        g->off += n;
    }
    if (g->off == g->len) {
        APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_eos_create(bb->bucket_alloc));
    }
    return APR_SUCCESS;
}

int mm_subreq_has_body(const request_rec *r)
{
    return r->main && apr_table_get(r->notes, MM_SUBREQ_BODY_NOTE) != NULL;
}

/* A script's header field replaces the client's of the same name (it
 * would come after it, and most readers take the first). */
static int set_header(void *t, const char *k, const char *v)
{
    apr_table_setn(t, k, v);
    return 1;
}

/* The subrequest's response fields, copied: their text is in its pool,
 * which ap_destroy_sub_req frees. */
static int copy_header(void *t, const char *k, const char *v)
{
    apr_table_add(t, k, v);
    return 1;
}

void mm_subreq_run(request_rec *r, apr_pool_t *p, const char *method, const char *uri,
                   const apr_table_t *headers, const char *body, apr_size_t body_len, apr_size_t max,
                   mm_subreq_result_t *out)
{
    keep_t *k = apr_pcalloc(p, sizeof *k);
    ap_filter_t *f = apr_pcalloc(p, sizeof *f);
    request_rec *rr;
    int rc;

    k->kept = apr_brigade_create(p, r->connection->bucket_alloc);
    k->max = max;
    /* The last filter of the subrequest's chain: made by hand, as httpd's
     * own ap_add_output_filter would put it on r's chain. */
    f->frec = keep_frec;
    f->ctx = k;
    f->r = r;
    f->c = r->connection;

    rr = ap_sub_req_method_uri(method, uri, r, f);
    if (headers) {
        apr_table_do(set_header, rr->headers_in, headers, NULL);
    }
    if (body) {
        give_t *g = apr_pcalloc(p, sizeof *g);

        g->data = body;
        g->len = body_len;
        /* The body's framing is this one's; kept_body tells mod_proxy a
         * subrequest has a body to send (it sends none otherwise). */
        apr_table_setn(rr->headers_in, "Content-Length", apr_off_t_toa(rr->pool, (apr_off_t)body_len));
        apr_table_unset(rr->headers_in, "Transfer-Encoding");
        apr_table_setn(rr->notes, MM_SUBREQ_BODY_NOTE, "1");
        rr->kept_body = apr_brigade_create(rr->pool, r->connection->bucket_alloc);
        if (body_len) {
            APR_BRIGADE_INSERT_TAIL(rr->kept_body,
                                    apr_bucket_immortal_create(body, body_len, r->connection->bucket_alloc));
        }
        ap_add_input_filter_handle(give_frec, g, rr, rr->connection);
    }
    out->status = rr->status;
    if (rr->status == HTTP_OK) {
        rc = ap_run_sub_req(rr);
        out->status = (rc == OK || rc == DONE) ? rr->status : rc;
    }
    out->headers = apr_table_make(p, 16);
    apr_table_do(copy_header, out->headers, rr->err_headers_out, NULL);
    apr_table_do(copy_header, out->headers, rr->headers_out, NULL);
    if (rr->content_type && !apr_table_get(out->headers, "Content-Type")) {
        apr_table_setn(out->headers, "Content-Type", apr_pstrdup(p, rr->content_type));
    }
    ap_destroy_sub_req(rr);
    out->body = k->kept;
    out->len = k->len;
    out->too_large = k->too_large;
}

void mm_subreq_register_hooks(apr_pool_t *p)
{
    keep_frec = ap_register_output_filter(MM_SUBREQ_FILTER, keep_out, NULL, AP_FTYPE_CONNECTION);
    /* Below the subrequest's content filters (which httpd adds later, by
     * type), above the protocol's: the bottom of its own chain. */
    give_frec = ap_register_input_filter(MM_SUBREQ_BODY_FILTER, give_in, NULL,
                                         (ap_filter_type)(AP_FTYPE_PROTOCOL - 2));
}
