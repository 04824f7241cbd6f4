/* rb_server.c: Apache::Server, the virtual host serving the current request
 * (or the server of a server phase), read-only: a server_rec is shared by
 * every thread, so a request must not change it. The fields are a table,
 * one getter serving every row. */

#include <stddef.h>

#include "httpd.h"
#include "http_config.h"
#include "http_core.h"

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/proc.h>
#include <mruby/string.h>

#include "binding.h"
#include "classes.h"

typedef enum { MM_SV_STR, MM_SV_INT, MM_SV_UINT, MM_SV_CHAR, MM_SV_PORT, MM_SV_TIME } mm_sv_type_e;

static const struct {
    const char *name;
    size_t offset; /* in server_rec */
    mm_sv_type_e type;
} fields[] = {
#define MM_SV(name, member, type)                                                                            \
    {                                                                                                        \
        name, offsetof(server_rec, member), MM_SV_##type                                                     \
    }
    MM_SV("hostname", server_hostname, STR),
    MM_SV("admin", server_admin, STR),
    MM_SV("scheme", server_scheme, STR),
    MM_SV("redirect_server_scheme", server_scheme, STR),
    MM_SV("error_fname", error_fname, STR),
    MM_SV("path", path, STR),
    MM_SV("defn_name", defn_name, STR),
    MM_SV("port", port, PORT),
    MM_SV("redirect_server_port", port, PORT),
    MM_SV("defn_line_number", defn_line_number, UINT),
    MM_SV("is_virtual", is_virtual, CHAR),
    MM_SV("keep_alive", keep_alive, INT),
    MM_SV("keep_alive_max", keep_alive_max, INT),
    MM_SV("pathlen", pathlen, INT),
    MM_SV("limit_req_line", limit_req_line, INT),
    MM_SV("limit_req_fieldsize", limit_req_fieldsize, INT),
    MM_SV("limit_req_fields", limit_req_fields, INT),
    MM_SV("timeout", timeout, TIME),
    MM_SV("keep_alive_timeout", keep_alive_timeout, TIME),
#undef MM_SV
};

#define FIELD_COUNT (sizeof fields / sizeof fields[0])

static server_rec *server_of(mrb_state *mrb, mrb_value self)
{
    mm_run_t *run = mm_binding_unwrap_run(mrb, self, NULL);

    return run->r ? run->r->server : run->s;
}

static mrb_value server_field(mrb_state *mrb, mrb_value self, size_t i)
{
    server_rec *s = server_of(mrb, self);
    const char *base = (const char *)s + fields[i].offset;

    switch (fields[i].type) {
    case MM_SV_STR: {
        const char *v = *(const char *const *)base;
        return v ? mrb_str_new_cstr(mrb, v) : mrb_nil_value();
    }
    case MM_SV_INT:
        return mrb_fixnum_value(*(const int *)base);
    case MM_SV_UINT:
        return mrb_fixnum_value(*(const unsigned *)base);
    case MM_SV_CHAR:
        return mrb_fixnum_value(*(const char *)base);
    case MM_SV_PORT:
        return mrb_fixnum_value(*(const apr_port_t *)base);
    case MM_SV_TIME: /* microseconds, as mod_mruby gave them */
        return mrb_fixnum_value((mrb_int) * (const apr_interval_time_t *)base);
    }
    return mrb_nil_value();
}

MM_INDEXED_FUNCS(server_field);

/* The DocumentRoot configured for this server (Request#document_root is the
 * one in effect for the request). */
static mrb_value server_document_root(mrb_state *mrb, mrb_value self)
{
    server_rec *s = server_of(mrb, self);
    core_server_config *conf = ap_get_core_module_config(s->module_config);

    return conf && conf->ap_document_root ? mrb_str_new_cstr(mrb, conf->ap_document_root) : mrb_nil_value();
}

static mrb_value server_loglevel(mrb_state *mrb, mrb_value self)
{
    return mrb_fixnum_value(server_of(mrb, self)->log.level);
}

static mrb_value server_virtual_p(mrb_state *mrb, mrb_value self)
{
    return mrb_bool_value(server_of(mrb, self)->is_virtual != 0);
}

/* mod_mruby had setters (error_fname=, loglevel=, timeout=) that changed the
 * server for every request of the process, under other threads' feet. */
static mrb_value server_read_only(mrb_state *mrb, mrb_value self)
{
    mrb_raise(mrb, E_NOTIMP_ERROR,
              "Apache::Server is read-only: changing it would affect every request of the process");
    return mrb_nil_value();
}

void mm_server_init(mrb_state *mrb)
{
    struct RClass *c = mm_binding_define_wrapper_class(mrb, "Server", 0);
    size_t i;

    mm_binding_define_reader(mrb, "server", c, 0);
    for (i = 0; i < FIELD_COUNT; i++) {
        mrb_define_method(mrb, c, fields[i].name, server_field_at[i], MRB_ARGS_ANY());
    }
    mrb_define_method(mrb, c, "document_root", server_document_root, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "docroot", server_document_root, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "loglevel", server_loglevel, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "virtual?", server_virtual_p, MRB_ARGS_NONE());
    mrb_define_method(mrb, c, "error_fname=", server_read_only, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, c, "loglevel=", server_read_only, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, c, "timeout=", server_read_only, MRB_ARGS_REQ(1));
}
