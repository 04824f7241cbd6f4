/* rb_ssl.c: the TLS facts of a request: Request#ssl? and Request#ssl_var,
 * Connection#ssl?. They ask httpd's ssl hooks (ap_ssl_conn_is_ssl,
 * ap_ssl_var_lookup, httpd 2.4.47 and later), which mod_ssl answers, so a
 * script reads SSL_CLIENT_S_DN or SSL_PROTOCOL without SSLOptions
 * +StdEnvVars filling every request's environment. */

#include "httpd.h"
#include "http_ssl.h"

#include <mruby.h>
#include <mruby/string.h>

#include "binding.h"

/* The connection's TLS state: a secondary connection (an HTTP/2 stream) is
 * secure when its main connection is, which ap_ssl_conn_is_ssl knows. */
static int request_is_ssl(request_rec *r)
{
    return ap_ssl_conn_is_ssl(r->connection);
}

static mrb_value request_ssl_p(mrb_state *mrb, mrb_value self)
{
    return mrb_bool_value(request_is_ssl(mm_binding_unwrap(mrb, self, NULL)));
}

static mrb_value conn_ssl_p(mrb_state *mrb, mrb_value self)
{
    return mrb_bool_value(request_is_ssl(mm_binding_unwrap(mrb, self, NULL)));
}

/* r.ssl_var("SSL_CLIENT_S_DN"): the value mod_ssl would put in the
 * environment under SSLOptions +StdEnvVars (+ExportCertData for the PEM
 * ones), or nil: outside TLS, for an unknown name, and for an empty value
 * (which mod_ssl leaves out of the environment too). The value is made in
 * the request's pool by the provider and copied into a Ruby String. */
static mrb_value request_ssl_var(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);
    mrb_value name;
    const char *cname, *val;

    mrb_get_args(mrb, "S", &name);
    cname = mm_binding_pstr(mrb, r->pool, name, "ssl_var's name");
    if (!request_is_ssl(r)) {
        return mrb_nil_value();
    }
    val = ap_ssl_var_lookup(r->pool, r->server, r->connection, r, cname);
    return val && *val ? mrb_str_new_cstr(mrb, val) : mrb_nil_value();
}

void mm_ssl_init(mrb_state *mrb)
{
    struct RClass *apache = mm_binding_apache(mrb);
    struct RClass *req = mrb_class_get_under(mrb, apache, "Request");
    struct RClass *conn = mrb_class_get_under(mrb, apache, "Connection");

    mrb_define_method(mrb, req, "ssl?", request_ssl_p, MRB_ARGS_NONE());
    mrb_define_method(mrb, req, "ssl_var", request_ssl_var, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, conn, "ssl?", conn_ssl_p, MRB_ARGS_NONE());
}
