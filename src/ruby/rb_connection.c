/* rb_connection.c: Apache::Connection, the client connection of the current
 * request (conn_rec), read-only. */

#include "httpd.h"
#include "http_core.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/string.h>

#include "binding.h"
#include "classes.h"

static conn_rec *conn_of(mrb_state *mrb, mrb_value self)
{
    return mm_binding_unwrap(mrb, self, NULL)->connection;
}

/* The peer of the TCP connection (a proxy, if there is one in between). */
static mrb_value conn_remote_ip(mrb_state *mrb, mrb_value self)
{
    return mm_binding_str_or_nil(mrb, conn_of(mrb, self)->client_ip);
}

static mrb_value conn_remote_port(mrb_state *mrb, mrb_value self)
{
    conn_rec *c = conn_of(mrb, self);

    return c->client_addr ? mrb_fixnum_value(c->client_addr->port) : mrb_nil_value();
}

/* The client's name under HostnameLookups On (or Double) for the request's
 * section, else nil. httpd looks the name up only when something asks for
 * it (often the access log, after the response), so the field alone would
 * be NULL in every phase a script runs in; ap_get_remote_host makes the
 * lookup then, and gives NULL for an address without a name where the
 * field holds "" after a failed lookup. */
static mrb_value conn_remote_host(mrb_state *mrb, mrb_value self)
{
    request_rec *r = mm_binding_unwrap(mrb, self, NULL);

    return mm_binding_str_or_nil(mrb,
                                 ap_get_remote_host(r->connection, r->per_dir_config, REMOTE_HOST, NULL));
}

static mrb_value conn_remote_logname(mrb_state *mrb, mrb_value self)
{
    return mm_binding_str_or_nil(mrb, conn_of(mrb, self)->remote_logname);
}

/* The client as the request names it (mod_remoteip may have changed it). */
static mrb_value conn_useragent_ip(mrb_state *mrb, mrb_value self)
{
    return mm_binding_str_or_nil(mrb, mm_binding_unwrap(mrb, self, NULL)->useragent_ip);
}

static mrb_value conn_local_ip(mrb_state *mrb, mrb_value self)
{
    return mm_binding_str_or_nil(mrb, conn_of(mrb, self)->local_ip);
}

static mrb_value conn_local_port(mrb_state *mrb, mrb_value self)
{
    conn_rec *c = conn_of(mrb, self);

    return c->local_addr ? mrb_fixnum_value(c->local_addr->port) : mrb_nil_value();
}

static mrb_value conn_local_host(mrb_state *mrb, mrb_value self)
{
    return mm_binding_str_or_nil(mrb, conn_of(mrb, self)->local_host);
}

/* Requests served on this connection before the current one. */
static mrb_value conn_keepalives(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value(conn_of(mrb, self)->keepalives);
}

static mrb_value conn_keepalive_p(mrb_state *mrb, mrb_value self)
{
    return mrb_bool_value(conn_of(mrb, self)->keepalive == AP_CONN_KEEPALIVE);
}

static mrb_value conn_data_in_input_filters(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value(conn_of(mrb, self)->data_in_input_filters);
}

static mrb_value conn_id(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value((mrb_int)conn_of(mrb, self)->id);
}

void mm_connection_init(mrb_state *mrb)
{
    struct RClass *c = mm_binding_define_wrapper_class(mrb, "Connection", 1);

    mm_binding_define_reader(mrb, "connection", c, 0);

    mrb_define_method(mrb, c, "remote_ip", conn_remote_ip, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "client_ip", conn_remote_ip, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "remote_port", conn_remote_port, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "remote_host", conn_remote_host, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "remote_logname", conn_remote_logname, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "useragent_ip", conn_useragent_ip, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "local_ip", conn_local_ip, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "local_port", conn_local_port, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "local_host", conn_local_host, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "keepalives", conn_keepalives, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "keepalive?", conn_keepalive_p, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "data_in_input_filters", conn_data_in_input_filters, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "id", conn_id, MRB_ARGS_NONE());
}
