/* output.c: a script's response body. What Apache.rputs and the like
 * write is buffered per request (r->request_config) and passed down the
 * output filters in 8 KB pieces; the content phase's end sends the rest
 * with EOS (run.c), so a small response gets a Content-Length. */

#include "apr_buckets.h"
#include "httpd.h"
#include "http_config.h"
#include "http_request.h"
#include "util_filter.h"

#include "mod_mruby.h"
#include "output.h"
#include "run.h"

/* The largest first write copied into a bucket of its own size. */
#define MM_FIRST_WRITE_MAX 1024

/* The response output of one request, kept in r->request_config. */
typedef struct {
    apr_bucket_brigade *out; /* output not yet passed down (r->pool) */
    apr_bucket *first;       /* the first write's bucket, while last in out */
    int flushed;             /* some output already went down the filter chain */
} mm_response_t;

static mm_response_t *response_of(request_rec *r)
{
    return ap_get_module_config(r->request_config, &mruby_module);
}

static apr_status_t flush_out(apr_bucket_brigade *bb, void *ctx)
{
    request_rec *r = ctx;
    apr_status_t rv;

    /* The body's length is httpd's to tell (from the body in one piece, or
     * by chunks): a script's Content-Length that did not match what it
     * wrote made the client take the rest for the next response. */
    if (!response_of(r)->flushed) {
        apr_table_unset(r->headers_out, "Content-Length");
        apr_table_unset(r->err_headers_out, "Content-Length");
    }
    rv = ap_pass_brigade(r->output_filters, bb);

    apr_brigade_cleanup(bb);
    response_of(r)->flushed = 1;
    response_of(r)->first = NULL;
    return rv;
}

/* An empty 8 KB buffer bucket at the end of bb, which apr_brigade_write
 * then fills. */
static void add_buffer(apr_bucket_brigade *bb)
{
    char *buf = apr_bucket_alloc(APR_BUCKET_BUFF_SIZE, bb->bucket_alloc);
    apr_bucket *e = apr_bucket_heap_create(buf, APR_BUCKET_BUFF_SIZE, apr_bucket_free, bb->bucket_alloc);

    e->length = 0;
    APR_BRIGADE_INSERT_TAIL(bb, e);
}

apr_status_t mm_run_write(request_rec *r, const char *data, apr_size_t len)
{
    mm_response_t *resp = response_of(r);

    if (r->eos_sent) {
        return APR_EOF; /* the response is complete (e.g. LogTransaction) */
    }
    if (r->connection->aborted) {
        return APR_ECONNABORTED; /* the client is gone: nobody reads it */
    }
    if (resp == NULL) {
        resp = apr_pcalloc(r->pool, sizeof *resp);
        resp->out = apr_brigade_create(r->pool, r->connection->bucket_alloc);
        ap_set_module_config(r->request_config, &mruby_module, resp);
    }
    /* The first write of a response, when small, is copied into a bucket of
     * its own size: most responses are one write, and an 8 KB buffer for a
     * few bytes costs more than the copy. */
    if (len > 0 && len <= MM_FIRST_WRITE_MAX && APR_BRIGADE_EMPTY(resp->out) && !resp->flushed) {
        resp->first = apr_bucket_heap_create(data, len, NULL, resp->out->bucket_alloc);
        APR_BRIGADE_INSERT_TAIL(resp->out, resp->first);
        return APR_SUCCESS;
    }
    /* Other small writes are copied into 8 KB heap buckets; once one is
     * full, or for a large write (passed as a transient bucket, which the
     * filters set aside if they keep it), the brigade goes down the chain.
     * apr_brigade_write takes a full heap bucket at the end for a full
     * buffer and flushes: the first write's bucket is full but small, so a
     * buffer is added after it. */
    if (resp->first && APR_BRIGADE_LAST(resp->out) == resp->first && len <= APR_BUCKET_BUFF_SIZE) {
        add_buffer(resp->out);
    }
    resp->first = NULL;
    return apr_brigade_write(resp->out, flush_out, r, data, len);
}

int mm_output_pending(request_rec *r)
{
    mm_response_t *resp = response_of(r);

    return resp && (resp->flushed || !APR_BRIGADE_EMPTY(resp->out));
}

static int was_flushed(request_rec *r)
{
    mm_response_t *resp = response_of(r);

    return resp && resp->flushed;
}

/* Whether the response has begun: output went down the chain, and httpd
 * sent the headers with it (sent_bodyct). Output passed down may still be
 * held by a filter that buffers (an output filter in buffer mode,
 * DEFLATE): until the headers went out, the status can still change, and
 * the request be answered otherwise (an error page, an internal redirect,
 * which leaves this request's filters and what they hold behind). */
int mm_output_began(request_rec *r)
{
    return was_flushed(r) && r->sent_bodyct;
}

/* Passes what is buffered down the chain, followed by EOS if eos. */
void mm_output_pass(request_rec *r, int eos)
{
    mm_response_t *resp = response_of(r);

    if (resp == NULL || (!eos && APR_BRIGADE_EMPTY(resp->out))) {
        return;
    }
    if (eos) {
        APR_BRIGADE_INSERT_TAIL(resp->out, apr_bucket_eos_create(r->connection->bucket_alloc));
    }
    flush_out(resp->out, r);
}

void mm_output_drop(request_rec *r)
{
    mm_response_t *resp = response_of(r);

    if (resp) {
        apr_brigade_cleanup(resp->out);
        resp->first = NULL;
    }
}

int mm_run_discard_output(request_rec *r)
{
    mm_output_drop(r);
    return mm_output_began(r);
}
