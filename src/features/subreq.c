/* subreq.c: a subrequest whose response body is kept by a filter of ours
 * at the end of its output chain, rather than sent to the client. */

#include "httpd.h"
#include "apr_strings.h"
#include "http_config.h"
#include "http_request.h"
#include "util_filter.h"

#include "subreq.h"

#define MM_SUBREQ_FILTER "MRUBY_SUBREQ_KEEP"

static ap_filter_rec_t *keep_frec;

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

void mm_subreq_run(request_rec *r, const char *method, const char *uri, const apr_table_t *headers,
                   apr_size_t max, mm_subreq_result_t *out)
{
    keep_t *k = apr_pcalloc(r->pool, sizeof *k);
    ap_filter_t *f = apr_pcalloc(r->pool, sizeof *f);
    request_rec *rr;
    int rc;
    char *body;
    apr_size_t len = 0;

    k->kept = apr_brigade_create(r->pool, r->connection->bucket_alloc);
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
    out->status = rr->status;
    if (rr->status == HTTP_OK) {
        rc = ap_run_sub_req(rr);
        out->status = (rc == OK || rc == DONE) ? rr->status : rc;
    }
    out->headers = apr_table_make(r->pool, 16);
    apr_table_do(copy_header, out->headers, rr->err_headers_out, NULL);
    apr_table_do(copy_header, out->headers, rr->headers_out, NULL);
    if (rr->content_type && !apr_table_get(out->headers, "Content-Type")) {
        apr_table_setn(out->headers, "Content-Type", apr_pstrdup(r->pool, rr->content_type));
    }
    ap_destroy_sub_req(rr);
    apr_brigade_pflatten(k->kept, &body, &len, r->pool);
    apr_brigade_cleanup(k->kept);
    out->body = body;
    out->len = len;
    out->too_large = k->too_large;
}

void mm_subreq_register_hooks(apr_pool_t *p)
{
    keep_frec = ap_register_output_filter(MM_SUBREQ_FILTER, keep_out, NULL, AP_FTYPE_CONNECTION);
}
