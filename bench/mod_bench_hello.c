/* mod_bench_hello.c: the benchmark's floor, the cheapest content handler
 * httpd can run. It answers "hello world!" for `SetHandler bench-hello`
 * with one immortal bucket and EOS in a single brigade: no copy, no
 * interpreter, and a Content-Length computed by httpd, as mod_mruby's
 * small responses get. Like the mod_mruby and mod_lua hello-world
 * scripts, it sets no content type: the responses compared are the same
 * bytes (a Content-Type header costs httpd about 480 instructions per
 * request).
 * Built by bench/run with apxs; never installed. */

#include "httpd.h"
#include "http_config.h"
#include "http_protocol.h"
#include "util_filter.h"

static const char body[] = "hello world!";

static int bench_hello_handler(request_rec *r)
{
    apr_bucket_alloc_t *ba = r->connection->bucket_alloc;
    apr_bucket_brigade *bb;

    if (r->handler == NULL || strcmp(r->handler, "bench-hello") != 0) {
        return DECLINED;
    }
    if (r->header_only) {
        return OK;
    }
    bb = apr_brigade_create(r->pool, ba);
    APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_immortal_create(body, sizeof body - 1, ba));
    APR_BRIGADE_INSERT_TAIL(bb, apr_bucket_eos_create(ba));
    return ap_pass_brigade(r->output_filters, bb) == APR_SUCCESS ? OK : AP_FILTER_ERROR;
}

static void bench_hello_register_hooks(apr_pool_t *p)
{
    ap_hook_handler(bench_hello_handler, NULL, NULL, APR_HOOK_MIDDLE);
}

module AP_MODULE_DECLARE_DATA bench_hello_module = {
    STANDARD20_MODULE_STUFF, NULL, NULL, NULL, NULL, NULL, bench_hello_register_hooks,
};
