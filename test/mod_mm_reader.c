/* mod_mm_reader.c: a request body reader for the tests of the input
 * filters' read modes. `SetHandler mm-reader` reads the body with
 * ap_get_brigade on r->input_filters in the mode the query string names
 * and answers one record per read:
 *
 *     KIND STATUS EOS DATA
 *
 * KIND is the read (peek, line, read, all), STATUS the apr_status_t it
 * returned, EOS 1 when the brigade held an EOS, DATA what came, with "\",
 * LF and CR escaped as \\, \n and \r. Modes (?mode=...&n=...):
 *
 *   readbytes    reads of n bytes (default 8192) up to the EOS
 *   getline      line reads up to the EOS
 *   nonblock     non-blocking line reads; each APR_EAGAIN is a record
 *                "eagain" and is followed by a blocking line read
 *   speculative  a peek of n bytes, the same peek again, reads of 8192
 *                bytes up to the EOS, a last peek
 *   exhaustive   one exhaustive read
 *   mixed        a peek of n bytes, one line read, reads of 8192 bytes
 *
 * A read that fails (but for APR_EOF) has no record and ends the handler
 * with that failure (AP_FILTER_ERROR when a filter refused the body: the
 * filter has answered). More than MAX_EMPTY_READS reads that give nothing
 * fail too, rather than loop. Built by the tests with apxs; never
 * installed. */

#include <stdlib.h>
#include <string.h>

#include "httpd.h"
#include "http_config.h"
#include "http_log.h"
#include "http_protocol.h"
#include "util_filter.h"
#include "util_script.h"

APLOG_USE_MODULE(mm_reader);

/* Successful reads that give nothing at all, before the reader gives up. */
#define MAX_EMPTY_READS 100

typedef struct {
    request_rec *r;
    apr_bucket_brigade *bb;
    int empty;
} reader_t;

static void escape_out(request_rec *r, const char *data, apr_size_t len)
{
    apr_size_t i;

    for (i = 0; i < len; i++) {
        switch (data[i]) {
        case '\\':
            ap_rputs("\\\\", r);
            break;
        case '\n':
            ap_rputs("\\n", r);
            break;
        case '\r':
            ap_rputs("\\r", r);
            break;
        default:
            ap_rputc(data[i], r);
        }
    }
}

/* One read, with its record when it succeeded (or met APR_EOF); returns
 * its status, *eos whether the brigade held the EOS. */
static apr_status_t one_read(reader_t *rd, const char *kind, ap_input_mode_t mode, apr_read_type_e block,
                             apr_off_t n, int *eos)
{
    apr_status_t rv = ap_get_brigade(rd->r->input_filters, rd->bb, mode, block, n);
    apr_bucket *e;

    *eos = 0;
    if (rv == APR_SUCCESS && APR_BRIGADE_EMPTY(rd->bb) && ++rd->empty > MAX_EMPTY_READS) {
        rv = APR_EGENERAL;
    }
    if (rv != APR_SUCCESS && rv != APR_EOF) {
        apr_brigade_cleanup(rd->bb);
        return rv; /* no record: a refusal has answered the request */
    }
    ap_rprintf(rd->r, "%s %d ", kind, rv);
    for (e = APR_BRIGADE_FIRST(rd->bb); e != APR_BRIGADE_SENTINEL(rd->bb); e = APR_BUCKET_NEXT(e)) {
        if (APR_BUCKET_IS_EOS(e)) {
            *eos = 1;
        }
    }
    ap_rprintf(rd->r, "%d ", *eos);
    for (e = APR_BRIGADE_FIRST(rd->bb); e != APR_BRIGADE_SENTINEL(rd->bb); e = APR_BUCKET_NEXT(e)) {
        const char *data;
        apr_size_t len;

        if (!APR_BUCKET_IS_METADATA(e) && apr_bucket_read(e, &data, &len, APR_BLOCK_READ) == APR_SUCCESS) {
            escape_out(rd->r, data, len);
        }
    }
    ap_rputs("\n", rd->r);
    apr_brigade_cleanup(rd->bb);
    return rv;
}

/* Reads of n bytes (or lines) up to the EOS. */
static apr_status_t read_to_end(reader_t *rd, const char *kind, ap_input_mode_t mode, apr_off_t n)
{
    apr_status_t rv;
    int eos = 0;

    while (!eos) {
        if ((rv = one_read(rd, kind, mode, APR_BLOCK_READ, n, &eos)) != APR_SUCCESS) {
            return rv;
        }
    }
    return APR_SUCCESS;
}

static apr_status_t nonblocking_lines(reader_t *rd)
{
    apr_status_t rv;
    int eos = 0;

    while (!eos) {
        rv = one_read(rd, "line", AP_MODE_GETLINE, APR_NONBLOCK_READ, 0, &eos);
        if (APR_STATUS_IS_EAGAIN(rv)) {
            ap_rputs("eagain\n", rd->r);
            rv = one_read(rd, "line", AP_MODE_GETLINE, APR_BLOCK_READ, 0, &eos);
        }
        if (rv != APR_SUCCESS) {
            return rv;
        }
    }
    return APR_SUCCESS;
}

static apr_status_t read_body(reader_t *rd, const char *mode, apr_off_t n)
{
    apr_status_t rv;
    int eos;

    if (strcmp(mode, "readbytes") == 0) {
        return read_to_end(rd, "read", AP_MODE_READBYTES, n);
    }
    if (strcmp(mode, "getline") == 0) {
        return read_to_end(rd, "line", AP_MODE_GETLINE, 0);
    }
    if (strcmp(mode, "nonblock") == 0) {
        return nonblocking_lines(rd);
    }
    if (strcmp(mode, "exhaustive") == 0) {
        return one_read(rd, "all", AP_MODE_EXHAUSTIVE, APR_BLOCK_READ, 0, &eos);
    }
    if (strcmp(mode, "speculative") == 0) {
        if ((rv = one_read(rd, "peek", AP_MODE_SPECULATIVE, APR_BLOCK_READ, n, &eos)) != APR_SUCCESS ||
            (rv = one_read(rd, "peek", AP_MODE_SPECULATIVE, APR_BLOCK_READ, n, &eos)) != APR_SUCCESS ||
            (rv = read_to_end(rd, "read", AP_MODE_READBYTES, AP_IOBUFSIZE)) != APR_SUCCESS) {
            return rv;
        }
        one_read(rd, "peek", AP_MODE_SPECULATIVE, APR_BLOCK_READ, n, &eos);
        return APR_SUCCESS;
    }
    if (strcmp(mode, "mixed") == 0) {
        if ((rv = one_read(rd, "peek", AP_MODE_SPECULATIVE, APR_BLOCK_READ, n, &eos)) != APR_SUCCESS ||
            (rv = one_read(rd, "line", AP_MODE_GETLINE, APR_BLOCK_READ, 0, &eos)) != APR_SUCCESS) {
            return rv;
        }
        return eos ? APR_SUCCESS : read_to_end(rd, "read", AP_MODE_READBYTES, AP_IOBUFSIZE);
    }
    return APR_ENOTIMPL;
}

static int reader_handler(request_rec *r)
{
    apr_table_t *args;
    const char *mode, *n;
    reader_t rd;
    apr_status_t rv;

    if (r->handler == NULL || strcmp(r->handler, "mm-reader") != 0) {
        return DECLINED;
    }
    ap_args_to_table(r, &args);
    mode = apr_table_get(args, "mode");
    n = apr_table_get(args, "n");
    ap_set_content_type(r, "text/plain");
    rd.r = r;
    rd.bb = apr_brigade_create(r->pool, r->connection->bucket_alloc);
    rd.empty = 0;
    mode = mode ? mode : "readbytes";
    rv = read_body(&rd, mode, n ? (apr_off_t)atol(n) : AP_IOBUFSIZE);
    if (rv == APR_ENOTIMPL) {
        return HTTP_BAD_REQUEST;
    }
    if (rv != APR_SUCCESS && rv != AP_FILTER_ERROR) {
        ap_log_rerror(APLOG_MARK, APLOG_ERR, rv, r, "mm_reader: a %s read failed", mode);
    }
    return rv == APR_SUCCESS ? OK : ap_map_http_request_error(rv, HTTP_BAD_REQUEST);
}

static void register_hooks(apr_pool_t *p)
{
    ap_hook_handler(reader_handler, NULL, NULL, APR_HOOK_MIDDLE);
}

module AP_MODULE_DECLARE_DATA mm_reader_module = {
    STANDARD20_MODULE_STUFF, NULL, NULL, NULL, NULL, NULL, register_hooks,
};
